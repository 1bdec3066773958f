# Session 38, call 4 (final). run(kind nvidia-h100-x2, carry [".deps", ".ab"]).
#   base = the session's start 38cd7bd; new = main bd36beb (exp/ll-own-at-home d137ca8 merged: its src is
#   d137ca8's but one comment). Trees: scripts/ab_trees.sh base=38cd7bd new=main
#   The tests and sanitizers on d137ca8's kernels ran in c3; here the virtual-node suites, the session's A/B,
#   the figures, and the combine's receive share by the knob (information for the next session).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 480
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run ep_new 100 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_2x1 100 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 $T --gtest_filter='Ep*'
call_run ep_2x2_ll 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*'
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
for blocks in 80 88; do
  printf '#!/bin/bash\nFERRY_EP_COMBINE_RECV_BLOCKS=%s exec %s "$@"\n' $blocks "$N" > /tmp/rb$blocks.sh
  chmod +x /tmp/rb$blocks.sh
  call_ab rb${blocks}_ 2 $N /tmp/rb$blocks.sh "" ep --mode ll --tokens 128,256,512
done
call_end
