# Session 16, call 2 (warm after c1, same .ab builds): cross-node low latency over sm (2 virtual nodes) for both
# candidates against main, and intra-node low latency again (a second sample of c1's T=128 readings).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 560
ferry_device_cmake_args build; ferry_nccl_library_path
B=.ab/base/build/bench/ferry-bench; I=.ab/inl/build/bench/ferry-bench; N=.ab/noi/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_ab smll_inl_ 3 $B $I "$V" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smll_noi_ 3 $B $N "$V" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab ll2_inl_ 3 $B $I "" ep --mode ll --tokens 1,128,512
call_ab ll2_noi_ 3 $B $N "" ep --mode ll --tokens 1,128,512
call_end
