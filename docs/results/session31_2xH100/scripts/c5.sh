# Session 31, call 5 (run(kind nvidia-h100-x2, carry [".deps"])). Where the high-throughput layout step goes (c2: one
# kernel with a look-back took as long as main's two): a trace build of main (NOTE [EP trace]: the layout kernel's
# points 0, 7-12 (inside layout_block), 13; layout_add's 0, 1; the spans of both and of dispatch_send on each GPU's
# %globaltimer), rank rows at T=4096, 24 SMs, bf16 and fp8 input.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 300
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
call_run trace_ht 60 $M -np 2 build-trace/bench/ferry-bench ep --mode ht --layout rank_rows --sms 24 --no-nccl
grep -a "rank 0 layout\|rank 0 dispatch_send epoch .* p\|rank 0 layout_add" $CALL_DIR/trace_ht.log | head -60
call_end
