# Prepared for the next session (not run): main as one tree on 2 GPUs, the suites the session-12 changes touch,
# sanitizers on them, and issue 24's table with the read depth.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session12_2xH100/scripts/next1.sh 2>&1 | tail -80
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/next1; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests > $O/build.log 2>&1 || { grep " error" $O/build.log | head; exit 1; }
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"; T=build-device/tests/ferry_gpu_tests
run() { local name=$1 to=$2; shift 2; timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY' $O/$name.log | sort | uniq -c | head -3 | tr '\n' ' ')"; }
run np2 200 $M -np 2 $T
run 2x1_sm 200 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter="*AllReduce*:Ep*:Timeout.Hier*"
run 2x1_tcp 200 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter="*AllReduce*:Ep*:Timeout.Hier*"
run 2x2 250 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="*AllReduce*:Ep*:Timeout.Hier*"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run memcheck_ll 200 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter="Ep/EpMatrix.DispatchCombine/ll_*:Ep.HandleReuse"
OUT=$O/crossnode timeout $(( 560 - $(el) )) scripts/device_crossnode.sh > $O/crossnode.txt 2>&1; echo "crossnode rc=$? ($(el) s)"
grep -E "^(sm|tcp|cuda_ipc) " $O/crossnode/crossnode_table.txt
cd $O && rm -f build.log cfg.log && tar czf /tmp/next1.tgz . && find . -mindepth 1 -delete && mv /tmp/next1.tgz .
