# Session 48 c6 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~330 s. Tree new =
# main+scripts/ll_overlap_sm.patch (scripts/ab_trees.sh). The overlapped low-latency halves over sm with more ranks:
# 4 ranks sharing the GPU under MPS as 4x1 (every remote peer mapped) and 2x2 (a node's peer over "NVLink", here the
# same GPU; the remote ones mapped), the low-latency tests of Ep*.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 ${C6_BUDGET:-330}
call_build_trees ferry_gpu_tests new
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
LL="Ep/EpMatrix.DispatchCombine/ll_*:Ep.LowLatency*:Ep.Staged*:Ep.PathFollowsTheNodes:Ep.HandleReuse"
LL="$LL:Ep.ZeroTokenRanks:Ep.TokensWithoutExperts:Ep.DispatchesBackToBackThenSeveralCombines:Ep.BadExpertIdOnOneRank"
T=.ab/new/build/tests/ferry_gpu_tests
for per_node in 1 2; do
  call_run sm_4r_${per_node}pn 110 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=$per_node \
    -x UCX_TLS=sm,self $T --gtest_filter="$LL"
  grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_4r_${per_node}pn.log | head -6
done
echo quit | nvidia-cuda-mps-control
call_end
