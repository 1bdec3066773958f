# Prepared in session 23 for the next session's first call (nvidia-h100-x2; run(carry [".deps"]), ~200 s): where a
# high-throughput dispatch's layout step goes. c5 (Nsight Compute, clocks locked) gave the two layout kernels 8.1 and
# 6.5 us at T=4096, but c6's coalesced version (layout-coalesced_1f10e29.patch) left EpBuffer::route at 15.0-15.2 us
# and the dispatch unchanged, so memory accesses do not set their time. A trace build (NOTE [EP trace]) stamps the
# layout kernels' phases (layout: 0, 7-12 inside layout_block, 13; layout_add: 0, 1) and prints each kernel's spans
# (%globaltimer us mod 10^6), beside dispatch_send's: per phase inside the kernels, and the gaps between them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c1 300
FERRY_EP_TRACE=1 call_build_dir build-trace "ferry-bench"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-trace/bench/ferry-bench
for layout in expanded rank_rows; do
  call_run trace_$layout 60 $M $B ep --mode ht --layout $layout --dispatch-types bf16 --sms 24 --no-nccl --csv ''
  grep -a -E "^ht " $CALL_DIR/trace_$layout.log
  grep -a "rank 0 " $CALL_DIR/trace_$layout.log | grep -a -E " (layout|layout_add|dispatch_send) " | tail -40
done
call_end
