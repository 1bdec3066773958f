# Session 21, call 5 (run(kind nvidia-h100-x4, carry [".deps"]); it may come as 4x H200): main's library code
# (1cafcfb) on 4 GPUs of one host, the first real 4-GPU run of the rank-rows contract and of EpBuffer::route.
# Issue 23: "If 4- or 8-GPU kinds are lent, run the same there too, with no regression against
# docs/results/ep_4xH200.txt" (that file: session of 2026-11-22, before rank rows, 4x H200).
# 1. The whole GPU suite at 4 ranks, one per GPU.  2. ferry-bench ep --halves --check --route-ahead and
# ferry-bench allreduce at 4 ranks, NCCL in the same processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 470
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
nvidia-smi topo -m 2>/dev/null | head -8
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none -np 4"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
call_run gpu_np4 150 $M $T
call_run ep_table 150 $M $B ep --halves --check --route-ahead --csv $CALL_DIR/ep_4gpus_4ranks.csv
grep -h -E "^(ht|ll) |check:|ranks \(" $CALL_DIR/ep_table.log | head -40
call_run ar_table 80 $M $B allreduce --csv $CALL_DIR/allreduce_4gpus_4ranks.csv
grep -h -E "^ *[0-9]|ranks|auto" $CALL_DIR/ar_table.log | head -30
call_end
