# Session 13, call 5 (the budget's last 257 s): exp/net-pipelined-13 with the range size by transport
# (NOTE [EP across nodes: range size]): its tests over cuda_ipc and sm, and the range rule against the old
# 512 KiB ranges in the same binary (FERRY_EP_NET_RANGE_BYTES=524288), alternating, one round. No main build.
# Before, here: rm -rf .ab/*; mkdir -p .ab/pipe; git archive exp/net-pipelined-13 | tar -x -C .ab/pipe
# run(kind nvidia-h100-x2, carry [".deps",".ab"], timeout 200): bash docs/results/session13_2xH100/scripts/c5.sh 2>&1 | tail -40
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/c5; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( 170 - $(el) )); }
finish() { echo "total $(el) s"; cd $O && rm -f build_*.log cfg_*.log && tar czf /tmp/c5.tgz . && find . -mindepth 1 -delete && mv /tmp/c5.tgz .; exit 0; }
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && ferry_nccl_library_path && cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1)
cmake --build .ab/pipe/build -j32 --target ferry-bench ferry_gpu_tests > $O/build_new.log 2>&1 || { grep " error" $O/build_new.log | head; finish; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/pipe/build/tests/ferry_gpu_tests; B=.ab/pipe/build/bench/ferry-bench
IPC="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
run() { local name=$1 to=$2; shift 2; [ $(left) -lt 15 ] && { echo "$name skipped (time)"; return; }; [ $to -gt $(left) ] && to=$(left)
  timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]' $O/$name.log | sort | uniq -c | head -3 | tr '\n' ' ')"; }
run pipe_2x1_ipc 40 $M -np 2 $IPC $T --gtest_filter="Ep*"
run pipe_2x1_sm 40 $M -np 2 $SM $T --gtest_filter="Ep*"
run ipc_old 25 $M -np 2 $IPC -x FERRY_EP_NET_RANGE_BYTES=524288 $B ep --layout expanded --no-nccl
run ipc_new 25 $M -np 2 $IPC $B ep --layout expanded --no-nccl
run sm_old 30 $M -np 2 $SM -x FERRY_EP_NET_RANGE_BYTES=524288 $B ep --layout expanded --no-nccl
run sm_new 30 $M -np 2 $SM $B ep --layout expanded --no-nccl
for f in ipc_old ipc_new sm_old sm_new; do echo "== $f"; grep -E "^(ht|ll) " $O/$f.log; done
finish
