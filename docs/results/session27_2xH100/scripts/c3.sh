# Session 27 c3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]). Before (here): scripts/ab_trees.sh base=main new=exp/pair-layout-2
# Branch exp/pair-layout-2: session 26's pair layout as send-kernel instantiations of their own, on by default
# (FERRY_EP_PAIR_LAYOUT=1); every other kernel's PTX identical to main's (checked here). Tests (the new
# Ep.PairAndTokenLayoutsAgree compares pairs against tokens bitwise), sanitizers, --check, A/B against main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 580
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run restricted 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
for n in 3 4 8; do
  call_run shared_np$n 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep.PairAndTokenLayoutsAgree:Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.TopkAboveEight*:Ep.*Bad*'
done
for tool in memcheck racecheck synccheck; do
  call_run $tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.PairAndTokenLayoutsAgree:Ep.BadExpertIdOnOneRank'
done
call_run check_ll 40 $M -np 2 $N ep --mode ll --tokens 1,128 --check --csv ''
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_ 1 $B $N "" ep --mode ht --sms 24
call_end
