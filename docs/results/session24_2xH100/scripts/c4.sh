# Session 24, call 4 (the command line of the run, kept here): c3's A/B again for base against one (c2 showed the
# cross-node dispatch 1.05 slower with 2 rounds; its PTX is identical), and rank rows. A first try carried .ab
# again, which replaced the trees c3 had built (nothing ran); this one rebuilt them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; source scripts/common.sh
source scripts/device_call.sh; ferry_export_env; call_begin c4 230
if [ ! -x .ab/one/build/bench/ferry-bench ]; then call_build_trees ferry-bench base one; fi
B=.ab/base/build/bench/ferry-bench; O=.ab/one/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_ab net_one_ 4 $B $O "$V -x NCCL_P2P_DISABLE=1" ep --mode ht --layout expanded --dispatch-types bf16
call_ab rr_one_ 2 $B $O "" ep --mode ht --layout rank_rows --sms 24
call_end
