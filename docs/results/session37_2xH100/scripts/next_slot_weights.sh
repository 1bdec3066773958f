# Prepared in session 37, NOT run (no device time left). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~420 s.
#   base = main; new = exp/slot-weights 61dc792: every dispatch receive half (staged, direct, cross-node) writes a
#   received token's weights beside slot_rows too, and the combine's gather_item_rows loads them with slot_rows
#   instead of one L2 round trip after (row -> out_weights[row]) (NOTE [EP slot weights] in src/ep/rows.cuh).
#   Why: session 37's c3 trace put a low-latency combine send item at ~5 us for one token (slot_rows -> weights ->
#   two steps of rows -> release); issue 23's combine target is <= 22 us at T=128 (25.3 in session 37's figures).
#   ptxas: every kernel's spills as main's.
# Before (here): scripts/ab_trees.sh base=main new=exp/slot-weights
# If no case is slower: merge, then the figures (ferry-bench ep --mode ll --route-ahead --check) for the README.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_slot_weights 480
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_ep_checks $T  # Ep*, 3 / 8 shared ranks, memcheck / racecheck / synccheck
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run ep_2x1 120 $M -np 2 $VN $T --gtest_filter='Ep*'
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_end
