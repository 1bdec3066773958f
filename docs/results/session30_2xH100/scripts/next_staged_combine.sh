# Prepared in session 30 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]) on main, ~400 s.
# Why does the combine read 1.024-1.027 slower at T=128 after a staged low-latency dispatch (NOTE [EP staged low
# latency]) when its kernels are the same? Two candidates: (a) attribution: the bench times each op with events,
# max over ranks, and a staged dispatch ends at different times on the two ranks, so a rank's combine waits
# longer for its peer's partials (dispatch plus combine was 0.987-0.989); (b) the staged buffer's memory plan doubles
# the records and ready words in place, which moves the combine's regions (combine_stage, combine_ready, flags).
# (1) the halves timed apart (--halves: each half after the previous one completed, no cross-rank skew inside a
#     step), staged 0 against 1, 3 rounds: if combine_send / combine_recv alone match, (a);
# (2) the trace build's launch spans (%globaltimer, both ranks) at T=128, staged 0 and 1: where each rank's combine
#     starts against its peer's dispatch end;
# (3) the A/B again, 4 rounds, T=1 / 128 / 512. If (a): flip kStagedRowsByDefault (ep_memory_plan.hpp) and report
#     dispatch plus combine beside each op; if (b): move the second parity of records and ready words to the end of
#     the symmetric plan (every older region keeps its offset), and measure again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_staged_combine 560
( FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/build_trace.txt 2>&1 ) &
call_build_dir build-device ferry-bench
wait; cat $CALL_DIR/build_trace.txt
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench; BT=build-trace/bench/ferry-bench
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_EP_LL_STAGED=0"; w new "FERRY_EP_LL_STAGED=1"
call_ab halves_ 3 $CALL_DIR/base $CALL_DIR/new "" ep --mode ll --tokens 128 --halves
grep -h "halves (us)" $CALL_DIR/ab/halves_*.log | sort | uniq -c | head -24
for staged in 0 1; do
  call_run trace_staged$staged 40 $M -np 2 -x FERRY_EP_LL_STAGED=$staged $BT ep --mode ll --tokens 128 --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_staged$staged.log | grep -a " span " | sort -k3,3 -k5,5 | head -48
done
call_ab ll_ 4 $CALL_DIR/base $CALL_DIR/new "" ep --mode ll --tokens 1,128,512
rm -f $CALL_DIR/base $CALL_DIR/new
call_end
