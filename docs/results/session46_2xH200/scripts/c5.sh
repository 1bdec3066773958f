# Session 46 c5. run(kind nvidia-h200-x2, carry [".deps"]), ~400 s, main 815a0b2+ (the low-latency receive's early
# loads, NOTE [EP receive: loads in one round trip]; place_dispatch_records<false> also serves the hierarchical path).
#   1. build; memcheck on cross-node low-latency tests as 2x1 over sm (no MPS);
#   2. under MPS: Ep* as 2x2 over tcp (4 ranks on 2 GPUs, the hierarchical path); Ep* as 2x1 over sm;
#   3. EP aligned over sm with NCCL beside (figures); racecheck with the time left.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 400
call_build_dir build-device "ferry-bench ferry_gpu_tests"
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
LLT="Ep.LowLatencyGraphReplayWithNewRouting:Ep.TokensWithoutExperts:Ep.ZeroTokenRanks"
call_run memcheck_ll 70 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter="$LLT"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
MPS="-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_run tcp_2x2 120 $M -np 4 $MPS -x UCX_TLS=tcp,self -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
echo quit | nvidia-cuda-mps-control
call_run sm_2x1 60 $M -np 2 $SM $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*_2x*.log | head -12
call_run ep_sm 40 $M -np 2 $SM $N ep --aligned --iters 100 --warmup 10 --csv $CALL_DIR/ep_sm.csv
grep -a "^ht\|^ll" $CALL_DIR/ep_sm.log
call_run racecheck_ll 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter="Ep.ZeroTokenRanks"
call_end
