# Session 49 c2 on one H200: run(kind nvidia-h200, carry [".deps", ".ab"]), ~560 s. Trees (scripts/ab_trees.sh
# main=main ovl=main+docs/results/session48_1xH200/scripts/ll_overlap_sm.patch rdy=exp/ll-ready-words): ready words
# for the low-latency dispatch across nodes where every box is stored in place (NOTE [EP across nodes: ready
# words]): the receive grid places each item as it lands, beside the send grid. 2 virtual nodes on the ONE GPU
# under MPS over sm: rdy's --check, Ep* as 2x1, then the A/B ovl / rdy and main / rdy (3 and 2 rounds, --check,
# --no-nccl). A DIRECTION ONLY (both ranks on one GPU and one PCIe link).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 ${C2_BUDGET:-560}
call_build_trees ferry-bench main ovl rdy+ferry_gpu_tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
call_virtual_nodes
B=$ROOT/.ab
call_run rdy_check 60 $M2 $SM $B/rdy/build/bench/ferry-bench ep --mode ll --aligned --check --tokens 1,128,512 \
  --iters 20 --warmup 3 --no-nccl
grep -aE "check|^ll|rror|timed out" $CALL_DIR/rdy_check.log | head -12
call_run sm_2x1 170 $M2 $SM $B/rdy/build/tests/ferry_gpu_tests --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|timed out" $CALL_DIR/sm_2x1.log | head -8
CALL_MPIRUN="$M" call_ab sm_ll_ovl_ 3 "$B/ovl/build/bench/ferry-bench" "$B/rdy/build/bench/ferry-bench" \
  "$SM" ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl
CALL_MPIRUN="$M" call_ab sm_ll_main_ 2 "$B/main/build/bench/ferry-bench" "$B/rdy/build/bench/ferry-bench" \
  "$SM" ep --mode ll --aligned --check --tokens 128,512 --iters 30 --warmup 5 --no-nccl
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
echo quit | nvidia-cuda-mps-control
call_end
