# Session 17, call 6 (nvidia-h100-x2; the session's last ~250 s of device time): branch exp/rr-recv-early against main.
# The rank-rows receive block computes the offsets and the padding once every rank's counts are in, while the rows
# move, instead of after the last source's rows-written word (the ~10 us between the send half's end and the call's).
# Before: rm -rf .ab; for t in base:main new:exp/rr-recv-early; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"])
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 200
ferry_nccl_library_path
pids=()
for t in base new; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  targets="ferry-bench"; [ $t = new ] && targets="ferry-bench ferry_gpu_tests"
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j16 --target $targets > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run rr_np2 50 $M -np 2 $T --gtest_filter='EpRankRows*'
call_ab rr_ 3 $B $N "" ep --layout rank_rows --mode ht --sms 24,48
call_run san_memcheck 25 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='EpRankRowsCases.SendBlocksByRoleOrMixed'
call_run ep_np2 40 $M -np 2 $T --gtest_filter='Ep*'
call_end
