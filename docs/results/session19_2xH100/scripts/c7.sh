# Session 19, call 7 (nvidia-h100-x2, the budget's last ~240 s): branch exp/ep-mapped-signals (EP's direct-path
# signals stored by the GPU over mapped peers) against main: its Ep* suite over sm, then A/B over sm.
# Before: rm -rf .ab; for t in base:main new:exp/ep-mapped-signals; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session19_2xH100/scripts/c7.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 195
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_2x1_sm 50 $M -np 2 $SM $T --gtest_filter='Ep*'
call_ab ll_ 2 $B $N "$SM" ep --layout expanded --mode ll --no-nccl
call_ab ht_ 1 $B $N "$SM" ep --layout expanded --mode ht --no-nccl
call_end
