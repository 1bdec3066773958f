# Prepared in session 25 for the next session (NOT run). The one-role combine's own partial at any place in the rank
# order (combine-own-any-position_752f36d.patch, branch exp/own-any-position; NOTE [EP combine one role: own partial
# first]): a rank that is a token's third or later contributor (3+ ranks) keeps its rounded partial in its warp's
# slice of shared memory (64 KB of dynamic shared memory per block at 3+ ranks, none on 2) instead of staging it,
# so no own partial goes through memory. ptxas: the one-role kernel 44/80 bytes of spills (main 40/152); the
# two-role and receive kernels' PTX is main's. On 2 ranks the path is not taken (the own partial always comes
# first or second): the 2-GPU A/B must read 1.00. Where it pays is 4-8 ranks (8 ranks, top-8 of 256: ~60% of own
# items), so on a 4-GPU kind run the same with FERRY_NP=4 (tests and A/B at 4 ranks, one per GPU).
#   run(kind nvidia-h100-x2 or nvidia-h100-x4, carry [".deps", ".ab"]), ~400 s
# Before (here): scripts/ab_trees.sh base=main oa=main+docs/results/session25_2xH100/combine-own-any-position_752f36d.patch
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_own_any 560
NP=${FERRY_NP:-$(nvidia-smi -L | wc -l)}
call_build_trees ferry-bench base oa+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/oa/build/bench/ferry-bench; T=.ab/oa/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ONE='Ep.CombineOneRole*'
call_run restricted 60 $M -np $NP $T --gtest_filter='EpRestrictedSms*'
call_run ep_np$NP 120 $M -np $NP $T --gtest_filter='Ep*'
for n in 3 4 8; do  # ranks sharing the GPUs: own partials third or later
  call_run shared_np$n 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter="$ONE:Ep/EpMatrix.*ht_bf16*:Ep.ZipfSkew:Ep.ZeroTokenRanks"
done
for tool in memcheck racecheck; do  # 3 ranks: the shared-memory slice is used
  call_run ${tool}_np3 90 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_TIMEOUT_MS=60000 $SAN --tool $tool \
    --error-exitcode 86 $T --gtest_filter="$ONE"
done
call_run synccheck_np2 40 $M -np 2 $SAN --tool synccheck --error-exitcode 86 $T --gtest_filter="$ONE"
CALL_NP=$NP call_ab ht_ 3 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48  # one rank a GPU
call_end
