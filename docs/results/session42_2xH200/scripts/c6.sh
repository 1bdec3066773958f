# Session 42 c6. run(kind nvidia-h200-x2, carry [".deps"]), ~230 s, from a checkout of main (the working tree).
# Issue 23's rows on the final main: the torch bench (AllReduce bf16 1-16 MiB, torch symm-mem one-shot / two-shot
# and NCCL in the same processes) and the high-throughput EP SM sweep (rank rows and expanded, bf16, NCCL beside).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 250
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"
call_build_dir build-device "ferry-bench ferry_python"
N=$ROOT/build-device/bench/ferry-bench
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run torch_ar 50 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 1M:16M:2 --out $CALL_DIR/torch_ar
grep -aE "^ +[0-9]+[KM]: ferry" $CALL_DIR/torch_ar.log | tail -5
call_run bench_ep_sms 70 $M -np 2 $N ep --mode ht --sms 4,8,16,24,48,132 --dispatch-types bf16 \
  --csv $CALL_DIR/ep_sms_2xH200.csv
call_end
