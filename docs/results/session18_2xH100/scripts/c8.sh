# Session 18, call 8 (nvidia-h100-x2): the final tree (main 0058e83 = exp/own-rows-first 862ce27 + logs: the send
# kernels templated on own rows first) against main b588051, the A/B c5 ran on c173025.
# Before: rm -rf .ab; for t in base:b588051 new:0058e83; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session18_2xH100/scripts/c8.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c8 200
ferry_nccl_library_path
call_build_trees ferry-bench base new
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
printf '#!/bin/sh\nexec %s "$@" --own-rows-first\n' "$PWD/$N" > .ab/new_own.sh; chmod +x .ab/new_own.sh
call_ab rr_ 3 $B $N "" ep --layout rank_rows --mode ht --sms 8,16,24,48
AB_LAYOUT_ALIAS="rank_rows_own=rank_rows" call_ab own_ 2 $B .ab/new_own.sh "" ep --layout rank_rows --mode ht --sms 8
call_end
