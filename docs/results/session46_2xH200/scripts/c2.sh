# Session 46 c2. run(kind nvidia-h200-x2, carry [".deps"]), ~420 s, main (c1's code) built with the EP trace
# (FERRY_EP_TRACE=1, NOTE [EP trace]). Over UCX shared memory the dispatch trails NCCL (session 45 c5: ht bf16
# 0.96x, fp8 0.94x; ll fp8 0.64x, bf16 0.77x in c1 here), and low latency in ranges did not help (c1).
#   1. where the time goes: both ranks' kernel spans and phase points, ht bf16 and ll fp8 / bf16 over sm, aligned;
#   2. knob A/Bs in the trace build (one binary, ratios only): FERRY_EP_NET_RANGE_BYTES 2 MiB and 128 KiB against
#      the built-in 512 KiB (fill and drain of the pipeline), ht over sm aligned; --sms 24,32,48 with NCCL beside.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 480
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
N=$ROOT/build-trace/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
EP="$N ep --layout expanded --no-nccl --aligned --csv ''"
call_run tr_ht 40 $M $SM $EP --mode ht --dispatch-types bf16 --iters 60 --warmup 3
call_run tr_ht_halves 40 $M $SM $EP --mode ht --dispatch-types bf16 --iters 60 --warmup 3 --halves
call_run tr_ll_fp8 30 $M $SM $EP --mode ll --dispatch-types fp8 --iters 60 --warmup 3
call_run tr_ll_bf16 30 $M $SM $EP --mode ll --dispatch-types bf16 --iters 60 --warmup 3
call_run tr_ll_halves 30 $M $SM $EP --mode ll --dispatch-types fp8 --iters 60 --warmup 3 --halves
for f in $CALL_DIR/tr_*.log; do echo "== $(basename $f)"; grep -a "^ht\|^ll" $f; done
printf '#!/bin/bash\nexec %s "$@"\n' "$N" > /tmp/b.sh; chmod +x /tmp/b.sh
for rb in 2097152 131072; do
  printf '#!/bin/bash\nexport FERRY_EP_NET_RANGE_BYTES=%s\nexec %s "$@"\n' $rb "$N" > /tmp/rb$rb.sh; chmod +x /tmp/rb$rb.sh
  call_ab rb${rb}_ 2 /tmp/b.sh /tmp/rb$rb.sh "$SM" ep --mode ht --layout expanded --aligned --iters 100 --warmup 10 --no-nccl
done
call_run sms 60 $M $SM $N ep --mode ht --layout expanded --aligned --sms 24,32,48 --iters 100 --warmup 10 --csv ''
grep -a "^ht" $CALL_DIR/sms.log
call_end
