# Session 27 c5 (session 26's next_own_any.sh on exp/own-any-4 = exp/own-any-3 rebased on main 843009e). run(kind nvidia-h100-x4, carry [".deps", ".ab"]).
# The own partial at any place in the rank order only in a kernel for 3+ ranks (branch exp/own-any-3,
# combine-own-any-3_55040ae.patch; NOTE [EP combine one role: own partial first]); the 2-rank kernels keep main's
# source, but their PTX differs from main's in branch layout (ptxas 48/152 and 40/152 bytes of spills, as main),
# so the 2-rank A/B must read <= 1.00 before it merges. c4 (session 26) ran the first version: tests pass; 4-rank
# A/B 0.965 / 0.967 / 1.007 inside a ±5% spread (the unchanged dispatch 0.940-0.962); 2 ranks 1.043. Here: 4 rounds
# at 4 ranks, 3 at 2 ranks (GPUs 0-1). A 2-GPU-kind A/B (scripts/ab_bench.sh) is still needed if 2 ranks move.
# Before (here): scripts/ab_trees.sh base=main oa=exp/own-any-4
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 500
NP=$(nvidia-smi -L | wc -l); nvidia-smi topo -m > $CALL_DIR/topo.txt 2>&1
call_build_trees ferry-bench base oa+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/oa/build/bench/ferry-bench; T=.ab/oa/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ONE='Ep.CombineOneRole*'
call_run restricted 60 $M -np $NP $T --gtest_filter='EpRestrictedSms*'
call_run ep_np$NP 150 $M -np $NP $T --gtest_filter='Ep*'
for n in 3 8; do  # ranks sharing the GPUs: own partials third or later
  call_run shared_np$n 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter="$ONE:Ep/EpMatrix.*ht_bf16*:Ep.ZipfSkew:Ep.ZeroTokenRanks"
done
for tool in memcheck racecheck; do
  call_run ${tool}_np3 90 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_TIMEOUT_MS=60000 $SAN --tool $tool \
    --error-exitcode 86 $T --gtest_filter="$ONE"
done
call_run synccheck_np$NP 60 $M -np $NP $SAN --tool synccheck --error-exitcode 86 $T --gtest_filter="$ONE"
call_run check_np$NP 40 $M -np $NP $N ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "check" $CALL_DIR/check_np$NP.log | head -3
CALL_NP=$NP call_ab ht${NP}_ 4 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
CALL_NP=2 call_ab ht2_ 3 $B $N "-x CUDA_VISIBLE_DEVICES=0,1" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
call_end
