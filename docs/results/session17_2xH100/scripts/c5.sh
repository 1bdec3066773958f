# Session 17, call 5 (nvidia-h100-x2): the chunked layout, second form (exp/chunked-layout 10c1d3e: 256-token chunks only where they do not outnumber the send blocks, the layout out of line so the items do not spill) against main a22becc.
#   .ab/base = main; .ab/new = exp/chunked-layout (NOTE [EP chunked layout]: a high-throughput call of more than
#   1024 tokens lays out its tokens in chunks inside the send kernel instead of the two layout kernels).
# Before: rm -rf .ab; for t in base:main new:exp/chunked-layout; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"])
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 585
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
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; S="-x FERRY_TEST_SHARE_GPUS=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Correct first: the layout tests, rank rows (ChunkedLayout, FewFreeSms), restricted SMs, then the whole EP suite.
LT='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIdsAcrossLayoutBlocks:EpRankRowsCases.*:EpRestrictedSms.*'
call_run layout_np2 90 $M -np 2 $T --gtest_filter="$LT"
call_ab ht_ 3 $B $N "" ep --mode ht --sms 8,24,48
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 1,128,512
call_run ep_np2 90 $M -np 2 $T --gtest_filter='Ep*'
call_run layout_np4 60 $M -np 4 $S $T --gtest_filter='Ep.FusedAndSeparateLayoutAgree:EpRankRowsCases.ChunkedLayout:Ep.BadExpertIdsAcrossLayoutBlocks'
call_run san_memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='EpRankRowsCases.ChunkedLayout'
call_run 2x1_sm 60 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run san_racecheck 60 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='EpRankRowsCases.ChunkedLayout'
call_end
