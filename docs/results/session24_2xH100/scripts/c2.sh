# Session 24, call 2: run as prepared, right after c1 on the same machine (the trees of c1).
# Prepared in session 23 for the next session, right after next_c2.sh on the same held machine
# (run(carry [".deps"]): .ab stays built there), ~300 s. The one-role patch also factored the combine's item and
# home-sum steps out (combine_send_item in rows.cuh, sum_home_chunk in combine.cu), which changes the code of the
# kernels that keep two roles: the intranode combine with FERRY_EP_COMBINE_ONE_ROLE=0 and in low latency, and the
# cross-node combines (2x1 over sm). Each A/B here must show no case slower before the patch merges.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_c3 290
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_run ep_2x1_sm 60 $M -np 2 $V $T --gtest_filter='Ep*'
call_ab two_role_ 2 $B $N "-x FERRY_EP_COMBINE_ONE_ROLE=0" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
call_ab ll_ 2 $B $N "" ep --mode ll --tokens 128,512
call_ab net_ 2 $B $N "$V -x NCCL_P2P_DISABLE=1" ep --mode ht --layout expanded --dispatch-types bf16
call_end
