# Prepared in session 24 for the next session (NOT run; ~200 s; run(kind nvidia-h100-x2, carry [".deps"])):
# session 23's next_c1.sh (where a dispatch's layout step goes: the layout kernels' phases beside dispatch_send)
# and the one-role combine's phase sums (NOTE [EP trace] phase sums: per warp, the ticket, the items' partials,
# the home sums' waits and sums; ep-notes, session 24: ~5 us per item per warp to explain).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_trace 300
FERRY_EP_TRACE=1 call_build_dir build-trace "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-trace/bench/ferry-bench
for layout in expanded rank_rows; do
  call_run trace_$layout 60 $M $B ep --mode ht --layout $layout --dispatch-types bf16 --sms 24 --no-nccl --csv ''
  grep -a -E "^ht " $CALL_DIR/trace_$layout.log
  grep -a "rank 0 " $CALL_DIR/trace_$layout.log | grep -a -E " (layout|layout_add|dispatch_send) " | tail -40
done
grep -a "rank 0 combine_one_role" $CALL_DIR/trace_expanded.log | tail -10
# The same with 1024-column items (7x the items): what grows with the item count.
call_run trace_chunks 60 $M -x FERRY_EP_CHUNK_COLS=1024 $B ep --mode ht --layout expanded --dispatch-types bf16 \
  --sms 24 --no-nccl --csv ''
grep -a -E "^ht .*combine" $CALL_DIR/trace_chunks.log
grep -a "rank 0 combine_one_role" $CALL_DIR/trace_chunks.log | tail -10
call_end
