# Prepared in session 41, NOT run. run(kind nvidia-h200-x4 or nvidia-h100-x4, carry [".deps"]), ~350 s, from a
# checkout of main. The low-latency defaults at 3+ ranks were set on 4xH200 in the first sessions and every LL change
# since was tuned on 2 ranks (session 41 found one that was slower at 4: the own partial at home). This sweeps the LL
# knobs one at a time at 4 ranks (one ferry-bench run per value, NCCL off), T = 128 / 256 / 512,
# then repeats the default so the table has two default rows (its noise). A value that wins in both rounds of a
# follow-up A/B (call_ab with a wrapper) becomes the 3+ rank default, with the rule's measurement in ep_buffer.cpp.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_tune4 420
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench"
B=build-device/bench/ferry-bench
# One ferry-bench run per knob value (NAME=VALUE; "default" = none), every T, CSV per run; then one table.
runs="default FERRY_EP_COMBINE_CHUNK_COLS=512 FERRY_EP_COMBINE_CHUNK_COLS=1024 FERRY_EP_COMBINE_CHUNK_COLS=4096
FERRY_EP_CHUNK_COLS=1024 FERRY_EP_CHUNK_COLS=4096 FERRY_EP_DISPATCH_RECV_BLOCKS=44 FERRY_EP_DISPATCH_RECV_BLOCKS=110
FERRY_EP_COMBINE_RECV_BLOCKS=33 FERRY_EP_COMBINE_RECV_BLOCKS=88 default"
i=0
for r in $runs; do
  i=$((i + 1)); env_args=(); [ "$r" != default ] && env_args=(-x "$r")
  call_run tune_$i 40 mpirun --allow-run-as-root --bind-to none -np 4 "${env_args[@]}" $B ep --mode ll \
    --tokens 128,256,512 --no-nccl --csv $CALL_DIR/tune_$i.csv
  awk -F, -v run="$r" 'NR == 1 { for (c = 1; c <= NF; ++c) { if ($c == "op") op = c; if ($c == "tokens") tk = c;
      if ($c == "ferry_us") us = c } next }
    { printf "%-36s %-14s T=%-4s %8.2f\n", run, $op, $tk, $us }' $CALL_DIR/tune_$i.csv >> $CALL_DIR/tune.txt
done
cat $CALL_DIR/tune.txt
call_end
