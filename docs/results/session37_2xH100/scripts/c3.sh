# Session 37 c3: main 6737a27 (c2's pack tree merged). (1) Low-latency staging by size: FERRY_EP_LL_STAGED unset
# (bf16 staged up to 2 MiB of rows, fp8 up to 4 MiB) against =1 (every shape whose receive layout fits), same
# binary, 3 rounds alternating, T=128-768. (2) The EP trace (trace build) of the new staged dispatch and the
# combine at T=1, 128 and 512, fp8 and bf16.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 420
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
(FERRY_EP_TRACE=1 call_build_dir build-trace ferry-bench > $CALL_DIR/trace_build.txt 2>&1) &
call_build_dir build ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
N=build/bench/ferry-bench
mkdir -p $CALL_DIR/ab
for r in 1 2 3; do
  timeout 120 $M -np 2 $N ep --mode ll --tokens 128,256,512,768 --csv $CALL_DIR/ab/ab_stg_base_$r.csv \
    > $CALL_DIR/ab/stg_base_$r.log 2>&1 || echo "round $r base failed"
  timeout 120 $M -np 2 -x FERRY_EP_LL_STAGED=1 $N ep --mode ll --tokens 128,256,512,768 \
    --csv $CALL_DIR/ab/ab_stg_new_$r.csv > $CALL_DIR/ab/stg_new_$r.log 2>&1 || echo "round $r new failed"
done
python3 scripts/ab_compare.py $CALL_DIR/ab stg_ 2>&1 | grep -E "^(ferry|nccl)" | tee $CALL_DIR/ab/table_stg_.txt
echo "staging A/B done ($(call_elapsed) s)"
call_run check_staged 60 $M -np 2 -x FERRY_EP_LL_STAGED=1 $N ep --mode ll --tokens 256,512,768 --check --csv ''
wait; cat $CALL_DIR/trace_build.txt
BT=build-trace/bench/ferry-bench
for tok in 1 128 512; do
  call_run trace_$tok 40 $M -np 2 -x FERRY_EP_LL_STAGED=1 $BT ep --mode ll --tokens $tok --no-nccl
  grep -a "ferry ep trace" $CALL_DIR/trace_$tok.log | grep -a "rank 0 .* epoch 150 " | grep -av " span " | head -60
done
call_end
