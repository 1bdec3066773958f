# Session 49 c4 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~450 s. Trees (scripts/ab_trees.sh
# ovl=main+docs/results/session48_1xH200/scripts/ll_overlap_sm.patch fus=exp/net-fused-layout): the direct
# cross-node send computes the call's layout in its block 0 (NOTE [EP fused layout] across nodes) where the tokens
# fit one layout block, instead of the layout kernel before it (c1's trace: 5.6 us of layout kernel and 2.2 us of
# gap before a low-latency send). 2 virtual nodes on the ONE GPU under MPS, over sm: fus's --check, Ep* as 2x1, the
# low-latency tests on 4 ranks as 4x1, then the A/B ovl / fus: low latency 3 rounds, high throughput (not fused at
# T=4096: its send kernels' code changed, spills 64 -> 72 bytes) 2 rounds; --check, --no-nccl. A DIRECTION ONLY.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 ${C4_BUDGET:-460}
call_build_trees ferry-bench ovl fus+ferry_gpu_tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
B=$ROOT/.ab
call_run fus_check 60 $M2 $SM $B/fus/build/bench/ferry-bench ep --mode ll --aligned --check --tokens 1,128,512 \
  --iters 20 --warmup 3 --no-nccl
grep -aE "check|rror|timed out" $CALL_DIR/fus_check.log | head -6
call_run sm_2x1 170 $M2 $SM $B/fus/build/tests/ferry_gpu_tests --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_2x1.log | head -8
call_run sm_4x1 90 ${M:-} -np 4 $SM $B/fus/build/tests/ferry_gpu_tests \
  --gtest_filter="Ep.LowLatency*:Ep/EpMatrix.*ll*:Ep.BadExpert*:Ep.ZeroTokenRanks"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_4x1.log | head -8
CALL_MPIRUN="$M" call_ab sm_ll_ 3 "$B/ovl/build/bench/ferry-bench" "$B/fus/build/bench/ferry-bench" \
  "$SM" ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl
CALL_MPIRUN="$M" call_ab sm_ht_ 2 "$B/ovl/build/bench/ferry-bench" "$B/fus/build/bench/ferry-bench" \
  "$SM" ep --mode ht --aligned --check --iters 10 --warmup 3 --no-nccl
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
echo quit | nvidia-cuda-mps-control
call_end
