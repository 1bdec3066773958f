# Session 13, call 4: exp/net-pipelined (session 11, Part 6 of docs/internode.md: the direct cross-node path in
# ranges, halves overlapped) merged with main (exp/net-pipelined-13), measured where it had never run: windows in
# GPU memory over cuda_ipc, where the transport (not the receive half's host reads) is the large part. Base = main
# (build-device, with the new layout tests). Also main's Ep.BadExpertIdsAcrossLayoutBlocks / FusedAndSeparateLayoutAgree.
# Before, here: rm -rf .ab/*; mkdir -p .ab/pipe; git archive exp/net-pipelined-13 | tar -x -C .ab/pipe
# run(kind nvidia-h100-x2, carry [".deps",".ab"], timeout 450): bash docs/results/session13_2xH100/scripts/c4.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/c4; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( 430 - $(el) )); }
finish() { echo "total $(el) s"; cd $O && rm -f build_*.log cfg_*.log && tar czf /tmp/c4.tgz . && find . -mindepth 1 -delete && mv /tmp/c4.tgz .; exit 0; }
nvidia-smi -L
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1)
cmake --build build-device -j14 --target ferry-bench ferry_gpu_tests > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j18 --target ferry-bench ferry_gpu_tests > $O/build_new.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head; echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"; T=.ab/pipe/build/tests/ferry_gpu_tests
IPC="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
run() { local name=$1 to=$2; shift 2; [ $(left) -lt 20 ] && { echo "$name skipped (time)"; return; }; [ $to -gt $(left) ] && to=$(left)
  timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY' $O/$name.log | sort | uniq -c | head -3 | tr '\n' ' ')"; }
run main_layout 60 $M -np 2 build-device/tests/ferry_gpu_tests --gtest_filter="Ep.BadExpertIdsAcrossLayoutBlocks:Ep.FusedAndSeparateLayoutAgree"
run pipe_2x1_ipc 90 $M -np 2 $IPC $T --gtest_filter="Ep*"
run pipe_2x1_sm 60 $M -np 2 $SM $T --gtest_filter="Ep*"
if grep -q "FAILED  \]" $O/pipe_*.log; then grep -h "FAILED  \]" $O/pipe_*.log | head; fi
ab() {  # ab TAG ROUNDS ENV ARGS...: main (base) and the branch (new) alternating
  local tag=$1 rounds=$2 envs=$3; shift 3; mkdir -p $O/ab
  for r in $(seq 1 $rounds); do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/pipe/build/bench/ferry-bench
    [ $(left) -lt 30 ] && { echo "ab $tag skipped (time)"; break 2; }
    timeout 60 $M -np 2 $envs $b "$@" --csv $O/ab/ab_${tag}${s}_$r.csv > $O/ab/${tag}${s}_$r.log 2>&1 || echo "$tag $s $r failed"; done; done
  python3 scripts/ab_compare.py $O/ab $tag 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_$tag.txt; echo "ab $tag done ($(el) s)"; }
ab ipc_ 2 "$IPC" ep --layout expanded --no-nccl
ab sm_ 2 "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
finish
