# Session 28, c2: session 27's next_pair_passes.sh as run (on exp/pair-passes rebased: 600db57).
# Prepared in session 27 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]), ~330 s, on
# branch exp/pair-passes (git checkout exp/pair-passes first; this script is on main). NOTE [EP pair layout in
# passes] (routing_layout.cuh): every fused layout (up to 1024 tokens) takes one thread per (token, k) in passes,
# __match_any_sync and per-warp expert counts, chosen by FERRY_EP_PAIR_LAYOUT=2 (1: main's pairs where the block
# has a thread for every pair, else a thread per token). Aimed at the fused layout's cost past 128 tokens: low
# latency T=512 plain minus routed is 7.8 us of 52.4 (fp8), 7.4 of 63.2 (bf16) (session 27, c4).
# The tests with 2 (outputs bitwise main's: Ep.PairAndTokenLayoutsAgree compares 0 / 1 / 2), sanitizers, then one
# binary, the kind by wrapper, A/B 1 (main's default) against 2.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_pair_passes 570
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run pair_test 60 $M -np 2 $T --gtest_filter='Ep.PairAndTokenLayoutsAgree'
call_run ep_np2_kind2 150 $M -np 2 -x FERRY_EP_PAIR_LAYOUT=2 $T --gtest_filter='Ep*'
for n in 3 8; do
  call_run shared_np${n}_kind2 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_PAIR_LAYOUT=2 $T \
    --gtest_filter='Ep.PairAndTokenLayoutsAgree:Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.*Bad*'
done
for tool in memcheck racecheck synccheck; do
  call_run ${tool}_kind2 90 $M -np 2 -x FERRY_EP_PAIR_LAYOUT=2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.BadExpertIdOnOneRank:Ep/EpMatrix.*ll_bf16*'
done
for v in 1 2; do
  printf '#!/usr/bin/env bash\nexport FERRY_EP_PAIR_LAYOUT=%s\nexec %s "$@"\n' $v "$ROOT/build-device/bench/ferry-bench" \
    > $CALL_DIR/k$v
  chmod +x $CALL_DIR/k$v
done
call_run check_kind2 40 $M -np 2 $CALL_DIR/k2 ep --mode ll --tokens 1,128,512 --check --csv ''
call_ab ll_ 4 $CALL_DIR/k1 $CALL_DIR/k2 "" ep --mode ll --tokens 1,128,256,512
call_ab ht_ 2 $CALL_DIR/k1 $CALL_DIR/k2 "" ep --mode ht --tokens 512,1024 --sms 24
rm -f $CALL_DIR/k1 $CALL_DIR/k2
call_end
