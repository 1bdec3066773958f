# Session 24, call 6 (the command line of the run, on c5's warm machine and build): the one-role combine's chunk
# size (FERRY_EP_CHUNK_COLS), 2 rounds; output: ../c6/chunk_cols.txt (copied from the run's reply).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; source scripts/common.sh
ferry_export_env; B=build-device/bench/ferry-bench; M="mpirun --allow-run-as-root --bind-to none -np 2"
for r in 1 2; do for cc in 8192 3584 2048 1024; do
  echo "chunk $cc round $r: $($M -x FERRY_EP_CHUNK_COLS=$cc $B ep --mode ht --layout expanded --dispatch-types bf16 \
    --sms 24 --csv '' 2>&1 | grep -E '^ht .*combine')"
done; done
for cc in 8192 2048; do
  echo "chunk $cc sms48: $($M -x FERRY_EP_CHUNK_COLS=$cc $B ep --mode ht --layout expanded --dispatch-types bf16 \
    --sms 8,48 --csv '' 2>&1 | grep -E '^ht .*combine' | tr '\n' ' ')"
done
