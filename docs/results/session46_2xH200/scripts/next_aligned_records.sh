# Prepared in session 46, NOT run. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~420 s. Trees
# (scripts/ab_trees.sh): base=main, new=exp/aligned-records (NOTE [EP across nodes: aligned records]: the dispatch
# box's header, records and rows on 128 bytes; before, records were 16-byte multiples after a 1040-byte header, so
# every bf16 row started 112 bytes past a line).
# Why: over UCX shared memory the combine (partial rows, 128-byte multiples) reads 1.27x NCCL while the dispatch
# (records) reads 0.85-0.96x, the same bytes over the same PCIe (session 46 c5: ht dispatch bf16 2902 us / NCCL
# 2562, fp8 1587 / 1344, combine 2026 / 2570); partly written lines of host memory cost the PCIe short writes and
# the memory read-modify-writes.
#   1. new: Ep* as 2x1 over sm and tcp; 2x2 over tcp under MPS (the hierarchical path copies whole records);
#   2. A/B base / new, aligned: both modes over sm 3 rounds (NCCL beside), cuda_ipc 1, tcp 1 (ht).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_aligned_records 480
call_base_new ferry_gpu_tests
M2="$M -np 2"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"; TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run sm_2x1 70 $M2 $SM $T --gtest_filter="Ep*"
call_run tcp_2x1 80 $M2 $TCP $T --gtest_filter="Ep*"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run tcp_2x2 100 $M -np 4 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1 \
  -x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
echo quit | nvidia-cuda-mps-control
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x*.log | head -12
call_ab sm_ 3 $B $N "$SM" ep --aligned --iters 60 --warmup 5
call_ab ipc_ 1 $B $N "$IPC" ep --aligned --iters 60 --warmup 5 --no-nccl
call_ab tcp_ 1 $B $N "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
call_end
