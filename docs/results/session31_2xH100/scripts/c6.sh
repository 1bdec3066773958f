# Session 31, call 6 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])). The same trace as c5 on branch
# exp/layout-lookback (one layout kernel; its points 7-12 inside layout_block, the look-back between 11 and 12).
# Before (here): rm -rf .ab; mkdir -p .ab/new; git archive exp/layout-lookback | tar -x -C .ab/new; rm -rf .ab/new/docs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 240
FERRY_EP_TRACE=1 call_build_trees ferry-bench new
M="mpirun --allow-run-as-root --bind-to none"
call_run trace_ht 60 $M -np 2 .ab/new/build/bench/ferry-bench ep --mode ht --layout rank_rows --sms 24 --no-nccl
grep -a "rank 0 layout epoch 50\|rank 0 layout epoch 4[5-9] span" $CALL_DIR/trace_ht.log | head -30
call_end
