# Session 41 c4. run(kind nvidia-h200-x4, carry [".deps", ".ab"]), from a checkout of main, trees made by
#   scripts/ab_trees.sh base=abf60cc new=main
# main: the own partial at home only on 2 ranks (launchers) and the 2-rank send kernel without the 3+ rank branch
# (own_staged): the 2-rank kernel's SASS changed, so
#   1. build both trees;
#   2. new: Ep* on 2 ranks, the low-latency matrix on 3 GPUs (one rank each) and 8 ranks sharing 4 GPUs;
#      memcheck / racecheck / synccheck of the staged low-latency tests on 2 ranks;
#   3. A/B on 2 ranks, base against new, LL T=1/128/256/512, 3 rounds, --check (NCCL in the run).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 520
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"
call_build_trees ferry-bench base new+ferry_gpu_tests
T=.ab/new/build/tests/ferry_gpu_tests; B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
call_run np3_ll 60 $M -np 3 $T --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.ZeroTokenRanks:Ep.Staged*'
call_ep_checks $T
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512 --check
call_end
