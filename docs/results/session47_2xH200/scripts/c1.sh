# Session 47 c1. run(kind nvidia-h100-x2 or nvidia-h200-x2, carry [".deps", ".ab"]), ~200 s, from a
# checkout of main with the tree made by
#   scripts/ab_trees.sh probe=exp/probe-pull-sum2        (rebase the branch on main first)
# The ceiling of a pull combine for the rank rows on few SMs (ep-notes, Session 42): today's combine is a push
# (`store`) then a local sum of two rows (`local_sum2`); a zero-copy combine would pull the peer's row while summing
# (`pull_sum2`). ferry-bench nvlink times all three (every method's result checked) at 4-48 SMs; the rank-rows
# combine at 8 SMs moved 58 MB per rank in 420 us (c6), 0.48 of its 24-SM bandwidth.
# Decide: if 1 / t(pull_sum2) at 8 SMs is >= 0.8 of the 24-SM combine's rate (202.5 us for the same 58.5 MB of peer
# rows: pull_sum2 at 8 SMs <= ~250 us for 58.5 MB, i.e. >= ~234 GB/s), build the zero-copy combine input.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 280
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"
call_build_trees ferry-bench probe
call_run probe_nvlink 150 $M -np 2 $ROOT/.ab/probe/build/bench/ferry-bench nvlink --sms 4,8,16,24,48 \
  --bytes 58M --csv $CALL_DIR/nvlink_pull_sum2.csv
call_end
