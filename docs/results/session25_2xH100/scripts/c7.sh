# Session 25, call 7 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])), an experiment: the one-role combine in low
# latency too (branch exp/ll-one-role: combine() takes one role in both modes) against main ef7ce43. The low-latency
# tests on it, then the low-latency A/B (NCCL beside). The device time left was ~310 s.
# Before (here): scripts/ab_trees.sh base=main ll1=exp/ll-one-role
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 225
call_build_trees ferry-bench base ll1+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/ll1/build/bench/ferry-bench; T=.ab/ll1/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
call_run ll_tests 50 $M -np 2 $T --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.ZeroTokenRanks:Ep.TokensWithoutExperts'
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_end
