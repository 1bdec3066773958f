# Prepared in session 15 for the next one (not run): branch exp/net-ll-template (6addea5: the direct cross-node
# kernels templated on kPipelined, plus the review's mends: one header-send helper) against main, same run: low latency over sm across 2 virtual nodes (the 1-3%
# session 15's call 5 confirmed), high throughput over sm, then the branch's cross-node suites.
# Before: rm -rf .ab; mkdir -p .ab/base .ab/new; git archive main | tar -x -C .ab/base;
#         git archive exp/net-ll-template | tar -x -C .ab/new
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session15_2xH100/scripts/next_net_template.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin nettemplate 560
ferry_nccl_library_path
pids=()
for t in base new; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  targets="ferry-bench"; [ $t = new ] && targets="ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j15 --target $targets > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
BASE=.ab/base/build/bench/ferry-bench; NEW=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_ab smll_ 5 $BASE $NEW "$V -x UCX_TLS=sm,self" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smht_ 2 $BASE $NEW "$V -x UCX_TLS=sm,self" ep --layout expanded --no-nccl --mode ht
M="mpirun --allow-run-as-root --bind-to none"
call_run 2x1_sm 80 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run 2x1_ipc 80 $M -np 2 $V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 $T --gtest_filter='Ep*'
call_run 2x2 100 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter='Ep*'
call_end
