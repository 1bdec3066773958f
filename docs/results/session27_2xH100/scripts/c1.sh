# Session 27 c1 (session 26's next_pair_layout.sh). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~450 s.
# Branch exp/pair-layout (pair-layout_fea479f.patch; NOTE [EP pair layout], src/ep/routing_layout.cuh): a one-block
# layout with one thread per (token, k) where the block has a thread for every pair (the fused low-latency layout
# up to 128 tokens at top-8; the layout kernel up to 32), selected by FERRY_EP_PAIR_LAYOUT=1 (off: main's layout,
# a runtime branch). Aimed at the low-latency dispatch's layout step (plain minus routed: 4.6 us of 32.4 at T=128).
# Its outputs must be main's bit for bit: the Ep* suite with it on (exact placement, counts, bad and repeated ids
# and the reported entry), 3 / 4 / 8 ranks sharing the GPUs, memcheck and racecheck; then A/B against main (LL
# T=1 / 128 / 512 with it on, 3 rounds; HT one round), NCCL in the same runs.
# Before (here): scripts/ab_trees.sh base=main pl=exp/pair-layout
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 575
call_build_trees ferry-bench base pl+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; T=.ab/pl/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 120 $M -np 2 -x FERRY_EP_PAIR_LAYOUT=1 $T --gtest_filter='Ep*'
for n in 3 4 8; do
  call_run shared_np$n 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_PAIR_LAYOUT=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.TopkAboveEight*:Ep.*Bad*'
done
for tool in memcheck racecheck; do
  call_run $tool 90 $M -np 2 -x FERRY_EP_PAIR_LAYOUT=1 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep/EpMatrix.*ll_bf16*:Ep.BadExpertIdOnOneRank'
done
printf '#!/usr/bin/env bash\nexport FERRY_EP_PAIR_LAYOUT=1\nexec %s "$@"\n' "$ROOT/.ab/pl/build/bench/ferry-bench" > $CALL_DIR/pl
chmod +x $CALL_DIR/pl
call_run check_ll 40 $M -np 2 $CALL_DIR/pl ep --mode ll --tokens 1,128 --check --csv ''
call_ab ll_ 3 $B $CALL_DIR/pl "" ep --mode ll --tokens 1,128,512
call_ab ht_ 1 $B $CALL_DIR/pl "" ep --mode ht --sms 24
rm -f $CALL_DIR/pl
call_end
