# Session 14, call 3 (warm after call 2): the low-latency rows over cuda_ipc again, 4 rounds (call 2 had 1.036/1.052 in 2 rounds).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env
call_begin c3 200
BASE=build-device/bench/ferry-bench; NEW=.ab/pipe/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_ab ipcll_ 4 $BASE $NEW "$IPC" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smll_ 2 $BASE $NEW "$V -x UCX_TLS=sm,self" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_end
