# Session 15, call 5: the question session 14 left open: is low latency across nodes over shared memory 1-2% slower
# since the pipelined merge (1c26959)? Base: main before the merge (7a9c60b, in .ab/base); new: main now. 5 rounds,
# alternating, --tokens 1,128,512, 2 virtual nodes on the 2 GPUs.
# Before: rm -rf .ab; mkdir -p .ab/base; git archive 7a9c60b | tar -x -C .ab/base
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session15_2xH100/scripts/c5.sh 2>&1 | tail -40
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 420
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ln -sfn "$ROOT/.deps" .ab/base/.deps
ferry_nccl_library_path
ferry_device_cmake_args build-device; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_main.log 2>&1
(cd .ab/base && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_base.log 2>&1)
cmake --build build-device -j16 --target ferry-bench > $CALL_DIR/build_main.log 2>&1 & p1=$!
cmake --build .ab/base/build -j16 --target ferry-bench > $CALL_DIR/build_base.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
BASE=.ab/base/build/bench/ferry-bench; NEW=build-device/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_ab smll_ 5 $BASE $NEW "$V -x UCX_TLS=sm,self" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_end
