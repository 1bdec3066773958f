# Prepared in session 13 for the next one (not run): exp/net-pipelined-13 (its head: ranges for high throughput only) against main, with
# every suite a merge needs. Build the branch beside main, then run this on 2 GPUs.
# Before, here: rm -rf .ab/*; mkdir -p .ab/pipe; git archive exp/net-pipelined-13 | tar -x -C .ab/pipe
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session13_2xH100/scripts/next_pipelined.sh 2>&1 | tail -80
# (Do not carry .ab again on a warm machine: it replaces the built tree.) Its stages may not all fit one call:
# the time guard skips the rest with a message; run those in a second call.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/np; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( 570 - $(el) )); }
finish() { echo "total $(el) s"; cd $O && rm -f build_*.log cfg_*.log && tar czf /tmp/np.tgz . && find . -mindepth 1 -delete && mv /tmp/np.tgz .; exit 0; }
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1)
cmake --build build-device -j12 --target ferry-bench > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j20 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $O/build_new.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head; echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/pipe/build/tests/ferry_gpu_tests; F=.ab/pipe/build/tests/ferry_gpu_fault_tests
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
run() { local name=$1 to=$2; shift 2; [ $(left) -lt 20 ] && { echo "$name skipped (time)"; return; }; [ $to -gt $(left) ] && to=$(left)
  timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY' $O/$name.log | sort | uniq -c | head -3 | tr '\n' ' ')"; }
run ipc 60 $M -np 2 $IPC $T --gtest_filter="Ep*"
run sm 60 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter="Ep*"
run tcp 90 $M -np 2 $V -x UCX_TLS=tcp,self $T --gtest_filter="Ep*"
run 2x2_direct 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter="Ep*"
run 2x2_hier 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
run faults 90 $U $F --gtest_filter='KilledPeer.AcrossNodes'
run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SF="Ep/EpMatrix.DispatchCombine/ht_*_h2048_*:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_*"  # small cases, both modes
for tool in memcheck racecheck; do run san_$tool 90 $M -np 2 $V -x UCX_TLS=sm,self $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"; done
run san_memcheck_ipc 90 $M -np 2 $IPC $SAN --tool memcheck --report-api-errors no --error-exitcode 86 $T --gtest_filter="$SF"
ab() {  # ab TAG ROUNDS ENV ARGS...: main (base) and the branch (new) alternating
  local tag=$1 rounds=$2 envs=$3; shift 3; mkdir -p $O/ab
  for r in $(seq 1 $rounds); do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/pipe/build/bench/ferry-bench
    [ $(left) -lt 30 ] && { echo "ab $tag skipped (time)"; break 2; }
    timeout 90 $M -np 2 $envs $b "$@" --csv $O/ab/ab_${tag}${s}_$r.csv > $O/ab/${tag}${s}_$r.log 2>&1 || echo "$tag $s $r failed"; done; done
  python3 scripts/ab_compare.py $O/ab $tag 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_$tag.txt; echo "ab $tag done ($(el) s)"; }
ab ipc_ 2 "$IPC" ep --layout expanded --no-nccl
ab sm_ 2 "$V -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1" ep --layout expanded
ab tcp_ 1 "$V -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1" ep --layout expanded
finish
