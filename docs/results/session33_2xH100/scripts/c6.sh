# Session 33 c6. run(kind nvidia-h100-x2, carry [".deps"]). main d455d70 (+ only this driver): issue 23's high-throughput
# rows with pre-quantized fp8 (c5's table ran --ht-quantize, which times fp8 quantized in the kernel instead).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 250
call_build_dir build-device ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench
call_run ep_table 90 $M -np 2 $B ep --mode ht --halves --check --route-ahead --csv $CALL_DIR/ep_ht_2xH100_2ranks.csv
grep -h -E "^(ht|ll) |check:" $CALL_DIR/ep_table.log | head -24
call_end
