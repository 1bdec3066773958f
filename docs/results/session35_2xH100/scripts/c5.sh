# Session 35, call 5. run(kind nvidia-h100-x2, carry [".deps"]), ~200 s.
# Main bbb81a2 (kernels as 5b65460's): the staged low-latency dispatch's timeline (NOTE [EP trace]) at T=128 / 512,
# fp8 (staged by default) and bf16 with FERRY_EP_LL_STAGED=1, for the layout-free sender design (ep-notes, session 35).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 300
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; BT=build-trace/bench/ferry-bench
for tok in 128 512; do
  call_run trace_fp8_$tok 40 $M -np 2 $BT ep --mode ll --tokens $tok --no-nccl --dispatch-types fp8
  grep -a "ferry ep trace" $CALL_DIR/trace_fp8_$tok.log | grep -a "rank 0 .* epoch 150 " | grep -av " span " | head -24
  call_run trace_bf16s_$tok 40 $M -np 2 -x FERRY_EP_LL_STAGED=1 $BT ep --mode ll --tokens $tok --no-nccl \
    --dispatch-types bf16
  grep -a "ferry ep trace" $CALL_DIR/trace_bf16s_$tok.log | grep -a "rank 0 .* epoch 150 " | grep -av " span " | head -24
done
call_end
