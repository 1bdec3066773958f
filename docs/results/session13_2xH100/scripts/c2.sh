# Session 13, call 2: main as one tree on 2 GPUs (the session-12 changes had only run kernel by kernel):
# the full GPU suite, the cross-node suites on virtual nodes, killed peers (read-depth kernel included),
# memcheck of the low-latency cases, and issue 24's table (scripts/device_crossnode.sh).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session13_2xH100/scripts/c2.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/c2; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( 575 - $(el) )); }
finish() { echo "total $(el) s"; cd $O && rm -f build.log cfg.log && tar czf /tmp/c2.tgz . && find . -mindepth 1 -delete && mv /tmp/c2.tgz .; exit 0; }
nvidia-smi -L; git log --oneline -1 2>/dev/null
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $O/build.log 2>&1 || { grep " error" $O/build.log | head; finish; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"; T=build-device/tests/ferry_gpu_tests
F=build-device/tests/ferry_gpu_fault_tests
run() { local name=$1 to=$2; shift 2; [ $(left) -lt 20 ] && { echo "$name skipped (time)"; return; }; [ $to -gt $(left) ] && to=$(left)
  timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY|SKIPPED \]' $O/$name.log | sort | uniq -c | head -4 | tr '\n' ' ')"; }
XN="*AllReduce*:Ep*:Timeout.Hier*"
run np2 150 $M -np 2 $T
run 2x1_sm 100 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter="$XN"
run 2x1_tcp 120 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter="$XN"
mkdir -p $O/crossnode; [ $(left) -gt 150 ] && { OUT=$O/crossnode FERRY_STAGE_TIMEOUT=100 timeout 200 scripts/device_crossnode.sh > $O/crossnode.txt 2>&1; echo "crossnode rc=$? ($(el) s)"; }
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
run faults 90 $U $F --gtest_filter='KilledPeer.*'
run faults_cuda_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
run 2x2 120 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="$XN"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run memcheck_ll 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter="Ep/EpMatrix.DispatchCombine/ll_*:Ep.HandleReuse"
grep -E "^(sm|tcp|cuda_ipc) " $O/crossnode/crossnode_table.txt
finish
