# Session 26, call 4 (run(kind nvidia-h100-x4, carry [".deps", ".ab"]), ~430 s): the one-role combine's own
# partial at any place in the rank order (branch exp/own-any-2: session 25's combine-own-any-position rebased on
# the L2 prefetch; NOTE [EP combine one role: own partial first]) against main, on 4 GPUs, where a rank is often a
# token's third or fourth contributor. Its tests at 4 ranks (one per GPU), 3 / 4 / 8 ranks sharing the GPUs,
# memcheck / racecheck at 3 shared ranks (the shared-memory slice is used), synccheck; A/B at 4 ranks, NCCL in the
# same runs; one round at 2 ranks on GPUs 0-1 (the path is not taken there; the 2-GPU kind's A/B is call 5's).
# Before (here): scripts/ab_trees.sh base=main oa=exp/own-any-2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
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
CALL_NP=$NP call_ab ht${NP}_ 2 $B $N "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
CALL_NP=2 call_ab ht2_ 1 $B $N "-x CUDA_VISIBLE_DEVICES=0,1" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
call_end
