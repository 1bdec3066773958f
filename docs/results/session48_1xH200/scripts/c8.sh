# Session 48 c8 on one H200: run(kind nvidia-h200, carry [".deps"]), ~200 s. ONE rank on the one GPU (no sharing):
# ferry-bench pcie with its host buffers from cudaHostAlloc and, new, from mmap'd shared pages registered with
# cudaHostRegister (--registered-host: what a UCX shared-memory landing is), in items of 14336 (the probe's bf16
# row), 7424 (a low-latency fp8 record), 3584 and 1792 bytes (a low-latency bf16 / fp8 chunk: what one warp of the
# cross-node receive reads per item). Why the low-latency receive over shared memory reads ~21 GB/s (session 46's
# trace) where the probe loads 44-50: the kind of memory, or the size of the reads?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c8 ${C8_BUDGET:-190}
call_build_dir build "ferry-bench"
for mem in alloc registered; do
  for item in 14336 7424 3584 1792; do
    flag=""; [ $mem = registered ] && flag=--registered-host
    call_run pcie_${mem}_$item 30 mpirun --allow-run-as-root --bind-to none -np 1 build/bench/ferry-bench pcie \
      --sms 8,32,132 --bytes 16M --item-bytes $item $flag --csv $CALL_DIR/pcie_${mem}_$item.csv
    grep -E "^(store|load|both|ce_h2d) " $CALL_DIR/pcie_${mem}_$item.log | sed "s/^/$mem $item /"
  done
done
call_end
