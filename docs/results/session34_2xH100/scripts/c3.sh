# Session 34, call 3. run(kind nvidia-h100-x2, carry [".deps"]), ~200 s.
# c2 found SM loads from pinned host memory capped at ~30 GB/s per GPU at any SM count, the copy engine's h2d at 44:
# whether PTX's L2 prefetch-size hints or TMA bulk copies lift the SM loads, and what a send half of SM stores leaves
# a copy-engine receive (store+ce_h2d).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 400
call_build_dir build-device "ferry-bench"
B=build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"
call_run pcie_2ranks 120 $M -np 2 $B pcie --sms 2,8,24,66,132 --csv $CALL_DIR/pcie_2ranks.csv
call_run pcie_1rank 90 $M -np 1 $B pcie --sms 2,8,24,66,132 --csv $CALL_DIR/pcie_1rank.csv
call_run pcie_2ranks_2m 60 $M -np 2 $B pcie --bytes 2M --sms 24,66,132 --csv $CALL_DIR/pcie_2ranks_2m.csv
for f in pcie_2ranks pcie_1rank pcie_2ranks_2m; do echo "== $f"; grep -v "^\[" $CALL_DIR/$f.log | tail -12; done
call_end
