# Session 43 c8. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~200 s (the session's last device time), trees:
#   scripts/ab_trees.sh base=main tail=exp/ar-ll128-tail
# A trimmed session42_2xH200/scripts/next_ar_ll128_tail.sh (its tests and sanitizers passed on one H200 in c1):
#   1. the tail binary, knob unset against FERRY_ONE_SHOT_PIPELINED_LL128_TAIL_UNITS=16, bf16 8 / 16 / 32 MiB;
#   2. main against the tail binary (knob unset), bf16 2 / 4 / 6 MiB (the LL128 one-shot's SASS changed).
# 2 rounds each, NCCL in the run.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c8 215
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base tail
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/tail/build/bench/ferry-bench
printf '#!/bin/bash\nexport FERRY_ONE_SHOT_PIPELINED_LL128_TAIL_UNITS=16\nexec %s "$@"\n' "$N" > /tmp/tail16.sh
chmod +x /tmp/tail16.sh
call_ab tail16_ 2 $N /tmp/tail16.sh "" allreduce --dtypes bf16 --sizes 8M,16M,32M --algos auto --check
call_ab ll128_ 2 $B $N "" allreduce --dtypes bf16 --sizes 2M,4M,6M --algos auto --check
call_end
