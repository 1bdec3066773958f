# Session 31, call 1 (prepared in session 30 as next_staged_combine.sh; exp/staged-plan-tail rebased on main f32ab5e
# as ef37d97; the new tree also runs Ep* with FERRY_EP_LL_STAGED=1 at the end). Two trees: base = main, new = exp/staged-plan-tail. Before
# (here): rm -rf .ab; for t in base:main new:exp/staged-plan-tail; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]): bash docs/results/session30_2xH100/scripts/next_staged_combine.sh
# (~450 s). Why does the combine read 1.024-1.027 slower at T=128 after a staged low-latency dispatch (NOTE [EP
# staged low latency]) when its kernels are the same (the tagged counts' A/B showed 1.011 there too)? Two
# candidates: (a) attribution: the bench times each op between events, max over ranks; a faster or differently
# ending dispatch changes when each rank's combine can start summing its peer's partials (dispatch plus combine
# was 0.987-0.989); (b) the staged buffer's plan doubled records and ready words in place, which moved the
# combine's regions (combine_stage, combine_ready, flags): exp/staged-plan-tail keeps every older offset.
# (1) main, --halves (each half timed after the previous one completed), staged 0 against 1, 3 rounds: if
#     combine_send / combine_recv alone match, (a);
# (2) main's trace build: both ranks' launch spans at T=128, staged 0 and 1;
# (3) main staged 0 against exp/staged-plan-tail staged 1, 4 rounds: if the combine reads ~1.00 there, (b): merge the
#     branch and flip kStagedRowsByDefault (ep_memory_plan.hpp); if it still reads ~1.025 and (1) says (a), flip it
#     and report dispatch plus combine beside each op.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
( FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/build_trace.txt 2>&1 ) &
call_build_trees ferry-bench base new+ferry_gpu_tests
wait; cat $CALL_DIR/build_trace.txt
M="mpirun --allow-run-as-root --bind-to none"; BT=build-trace/bench/ferry-bench
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$3" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w base "FERRY_EP_LL_STAGED=0" $B; w staged "FERRY_EP_LL_STAGED=1" $B; w tail "FERRY_EP_LL_STAGED=1" $N
call_ab halves_ 3 $CALL_DIR/base $CALL_DIR/staged "" ep --mode ll --tokens 128 --halves
grep -h "halves (us)" $CALL_DIR/ab/halves_*.log | sort | uniq -c | head -24
for staged in 0 1; do
  call_run trace_staged$staged 40 $M -np 2 -x FERRY_EP_LL_STAGED=$staged $BT ep --mode ll --tokens 128 --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_staged$staged.log | grep -a " span " | sort -k3,3 -k5,5 | head -48
done
call_ab tail_ 3 $CALL_DIR/base $CALL_DIR/tail "" ep --mode ll --tokens 1,128,512
# the plan-tail tree's suites with the staged path forced on (every low-latency buffer that fits stages)
call_run ep_np2_tail 130 $M -np 2 -x FERRY_EP_LL_STAGED=1 .ab/new/build/tests/ferry_gpu_tests --gtest_filter='Ep*'
grep -a -E "StagedAndDirect|FAILED" $CALL_DIR/ep_np2_tail.log | head -8
rm -f $CALL_DIR/base $CALL_DIR/staged $CALL_DIR/tail
call_end
