# Prepared in session 24 for the next session (NOT run; ~230 s; run(kind nvidia-h100-x2, carry [".deps"])).
# 1. Session 23's next_c1.sh: a trace build (NOTE [EP trace]) and where a dispatch's layout step goes. Its
#    trace_expanded.log now also holds the one-role combine's phase sums ("combine_one_role" lines: per warp, the
#    ticket, the items' partials, the home token, the wait for the peers' partials, the sum; NOTE [EP trace] phase
#    sums), at whole rows.
# 2. The same phase sums with 1024-column items (7x the items; ep-notes, session 24: ~5 us per item and warp to
#    explain), on that build.
bash docs/results/session23_2xH100/scripts/next_c1.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env
call_begin next_trace 60
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-trace/bench/ferry-bench
call_run trace_chunks 50 $M -x FERRY_EP_CHUNK_COLS=1024 $B ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24 --no-nccl --csv ''
grep -a -E "^ht .*combine" $CALL_DIR/trace_chunks.log
grep -a "rank 0 combine_one_role" $CALL_DIR/trace_chunks.log | tail -10
call_end
