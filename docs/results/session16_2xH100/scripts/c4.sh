# Session 16, call 4 (nvidia-h100-x2): exp/fp8-scale-stores (NOTE [EP fp8 scale stores]: the quantizer stores 16
# scales at once per load batch instead of two 4-byte scales per 256-column step) against main, same run, NCCL on.
#   .ab/base = main; .ab/new = exp/fp8-scale-stores
# Before: rm -rf .ab; for t in base:main new:exp/fp8-scale-stores; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"])
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 585
ferry_nccl_library_path
pids=()
for t in base new; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  targets="ferry-bench"; [ $t = new ] && targets="ferry-bench ferry_gpu_tests"
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j15 --target $targets > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_ab ht_ 4 $B $N "" ep --mode ht --sms 24,48
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_ab smll_ 2 $B $N "$V" ep --layout expanded --no-nccl --mode ll --tokens 128,512
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; S="-x FERRY_TEST_SHARE_GPUS=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SF='Ep/EpMatrix.DispatchCombine/*fp8_h7168*:Ep/EpRankRows.DispatchCombine/fp8_h7168_k8*'
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_run 2x1_sm 60 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run 2x2 80 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter='Ep*'
call_run ep_np4 60 $M -np 4 $S $T --gtest_filter='Ep*:-*BackToBack1000*'
call_run san_memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter="$SF"
call_run san_racecheck 60 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter="$SF"
call_run san_synccheck 50 $M -np 2 $SAN --tool synccheck --error-exitcode 86 $T --gtest_filter="$SF"
call_end
