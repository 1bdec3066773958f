# Prepared in session 45, NOT run. run(kind nvidia-h200-x2, carry [".deps"]), ~250 s, from a checkout of main.
# The high-throughput dispatch over UCX shared memory (peers' landings mapped, the kernels store into host memory)
# reads 0.96 / 0.94x NCCL (c5: bf16 2667 us against 2552; each half alone on 24 SMs ~1.45 ms, i.e. ~40 GB/s over
# PCIe; fused ~22 GB/s). Is the fused call bound by the send half on its 12 SMs (half and half across nodes, NOTE
# [EP across nodes: halves' split])? Knob A/B in one binary: FERRY_EP_DISPATCH_RECV_BLOCKS 6 / 8 / 16 against the
# built-in 12, and --sms 32 / 48 (more SMs for both halves), aligned, NCCL (P2P off) beside.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_sm_split 400
call_build_dir build-device ferry-bench
N=$ROOT/build-device/bench/ferry-bench
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
printf '#!/bin/bash\nexec %s "$@"\n' "$N" > /tmp/b.sh; chmod +x /tmp/b.sh
for r in 6 8 16; do
  printf '#!/bin/bash\nexport FERRY_EP_DISPATCH_RECV_BLOCKS=%s\nexec %s "$@"\n' $r "$N" > /tmp/r$r.sh; chmod +x /tmp/r$r.sh
  call_ab recv${r}_ 2 /tmp/b.sh /tmp/r$r.sh "$SM" ep --mode ht --layout expanded --aligned --iters 100 --warmup 10
done
call_run sms 60 mpirun --allow-run-as-root --bind-to none -np 2 $SM $N ep --mode ht --layout expanded --aligned \
  --sms 24,32,48 --iters 100 --warmup 10 --csv $CALL_DIR/sms.csv
grep -a "^ht" $CALL_DIR/sms.log
call_end
