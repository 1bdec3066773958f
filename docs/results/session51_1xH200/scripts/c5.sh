# Session 51 c5 on one H200: run(kind nvidia-h200, carry [".deps"]), ~200 s, from a checkout of main. Issue 24's row
# "GPU-memory path (cuda_ipc): proxy put GB/s, 64 KiB-4 MiB >= 0.8 of ucx_perftest with cuda_ipc", last measured in
# session 7 (2xH200: 0.70 / 0.64 / 0.87 / 1.06 at 64K / 256K / 1M / 4M, before every later proxy change). Here 2
# virtual nodes on the ONE GPU (no MPS; the puts are UCX's cuda_ipc copies, GPU to the same GPU), windows in GPU
# memory, ucx_perftest -m cuda in the same run: ferry-bench net --memory cuda, 3 runs (and one with 1M-spread
# windows, cold buffers). The ratio against ucx_perftest on the same transport is the row's own measure.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 ${C5_BUDGET:-240}
call_build_dir build-device ferry-bench
N=$ROOT/build-device/bench/ferry-bench
M=${M:-mpirun --allow-run-as-root --bind-to none}
call_virtual_nodes
for r in 1 2 3; do
  call_run net_ipc_$r 60 $M2 $IPC $N net --memory cuda --sizes 64K,256K,1M,4M --bytes 256M
done
call_run net_ipc_window 60 $M2 $IPC $N net --memory cuda --sizes 64K,256K --bytes 256M --window 16M
for f in $CALL_DIR/net_ipc_*.log; do echo "== $(basename $f)"; grep -E "^(cuda|memory|-)|transport" $f; done
call_end
