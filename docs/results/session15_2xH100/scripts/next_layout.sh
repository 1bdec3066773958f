# Prepared in session 15 for the next one (not run): exp/layout-code-size's two forms against main, same run.
#   .ab/inline   = fe7e843 (the shorter layout inlined: low-latency bf16 T=1 0.907, fp8 T>=128 1.005-1.056 in calls 7-8)
#   .ab/noinline = 4175ab0 (the same layout out of line in the expanded send kernels, Params __grid_constant__)
# Before: rm -rf .ab; for t in base:main inline:fe7e843 noinline:4175ab0; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session15_2xH100/scripts/next_layout.sh 2>&1 | tail -60
# Merge the form with no case slower (then its tests: Ep* np2, the layout tests at np4, memcheck/racecheck of
# Ep.TopkAboveEight, and the cross-node Ep* suites over sm as 2x1, since the layout is shared with them).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin layout 560
ferry_nccl_library_path
pids=()
for t in base inline noinline; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j10 --target ferry-bench ferry_gpu_tests > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
BASE=.ab/base/build/bench/ferry-bench; INL=.ab/inline/build/bench/ferry-bench; NOI=.ab/noinline/build/bench/ferry-bench
call_ab ll_inline_ 4 $BASE $INL "" ep --no-nccl --mode ll --tokens 1,128,512
call_ab ll_noinline_ 4 $BASE $NOI "" ep --no-nccl --mode ll --tokens 1,128,512
call_ab ht_noinline_ 2 $BASE $NOI "" ep --no-nccl --mode ht --sms 8,24
call_run ep_np2_noinline 100 mpirun --allow-run-as-root --bind-to none -np 2 .ab/noinline/build/tests/ferry_gpu_tests --gtest_filter='Ep*'
call_end
