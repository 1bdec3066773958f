# Session 16, call 1 (nvidia-h100-x2): the two prepared candidates against main, same run, NCCL beside.
#   .ab/base = main (05f8603 + this script)
#   .ab/inl  = cand/inline   = main + exp/net-ll-template (6addea5) + exp/layout-code-size fe7e843 (layout inlined)
#   .ab/noi  = cand/noinline = main + exp/net-ll-template (6addea5) + exp/layout-code-size 4175ab0 (layout out of line)
# Before: rm -rf .ab; for t in base:main inl:cand/inline noi:cand/noinline; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]). Call 2 runs warm on the same build (.ab stays on the machine).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 575
ferry_nccl_library_path
pids=()
for t in base inl noi; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j6 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
B=.ab/base/build/bench/ferry-bench; I=.ab/inl/build/bench/ferry-bench; N=.ab/noi/build/bench/ferry-bench
call_ab ll_inl_ 3 $B $I "" ep --mode ll --tokens 1,128,512
call_ab ll_noi_ 3 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_inl_ 1 $B $I "" ep --mode ht --sms 24
call_ab ht_noi_ 1 $B $N "" ep --mode ht --sms 24
call_run latency 40 mpirun --allow-run-as-root --bind-to none -np 2 $B latency
tail -20 $CALL_DIR/latency.log
call_end
