# Session 43 c1. run(kind nvidia-h200, carry [".deps", ".ab"]), ~480 s, from a checkout of main, trees made by
#   scripts/ab_trees.sh base=main tail=exp/ar-ll128-tail
# One H200 only this session: correctness scale, ranks sharing the GPU under MPS.
#   1. exp/ar-ll128-tail (rebased on main df571aa): its test and *AllReduce* on 2 shared ranks, memcheck /
#      racecheck / synccheck of the new test (its A/B needs 2 GPUs).
#   2. Where the hierarchical AllReduce over tcp loses at 16 / 64 MB (issue 24: 0.83 / 0.73x NCCL's sockets): main's
#      bench as 2 virtual nodes on the one GPU over loopback tcp (the proxy and tcp are host work; the GPU part is
#      the staging stores and the reduction), no NCCL (it refuses 2 ranks on one GPU): the default, then by knob the
#      blocks (1 / 2 / 8 against tcp's 4), the proxy's put pieces (1 / 16 MiB against 4), the held signals' bound,
#      UCX's tcp socket buffers; then the proxy alone (ferry-bench net --exchange, host memory, both ways at once).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 540
{ nvidia-smi -q | grep -iE "product name|bus id"; nproc; } > $CALL_DIR/host.txt 2>&1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
M="mpirun --allow-run-as-root --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base tail+ferry_gpu_tests
T=.ab/tail/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench
call_run tail_test 60 $M -np 2 $T --gtest_filter="AllReduce.PipelinedLl128Tail*"
call_run tail_ar 90 $M -np 2 $T --gtest_filter="*AllReduce*"
for tool in memcheck racecheck synccheck; do
  call_run tail_$tool 70 $M -np 2 -x FERRY_TIMEOUT_MS=120000 $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter="AllReduce.PipelinedLl128TailEveryTypeAndOp"
done
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/tail_*.log | head -12
V="-x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self"
AR="allreduce --sizes 1M,16M,64M --dtypes bf16 --algos auto --no-nccl --iters 5 --warmup 2"
call_run tcp_default 60 $M -np 2 $V $B $AR --csv $CALL_DIR/tcp_default.csv
for k in "FERRY_HIERARCHICAL_BLOCKS=1" "FERRY_HIERARCHICAL_BLOCKS=2" "FERRY_HIERARCHICAL_BLOCKS=8" \
  "FERRY_PROXY_PUT_CHUNK_BYTES=1048576" "FERRY_PROXY_PUT_CHUNK_BYTES=16777216" \
  "FERRY_PROXY_HOLD_SIGNALS_BYTES=67108864" "UCX_TCP_SNDBUF=8M UCX_TCP_RCVBUF=8M"; do
  tag=$(echo "$k" | tr ' =' '__')
  x=""; for kv in $k; do x="$x -x $kv"; done
  call_run tcp_$tag 60 $M -np 2 $V $x $B $AR --csv $CALL_DIR/tcp_$tag.csv
done
call_run tcp_default2 60 $M -np 2 $V $B $AR --csv $CALL_DIR/tcp_default2.csv
call_run tcp_stats 60 $M -np 2 $V -x FERRY_PROXY_STATS=1 $B net --memory host --sizes 4M,16M --bytes 256M --both-ways
for pieces in 1 4; do
  call_run tcp_exchange_p$pieces 60 $M -np 2 $V $B net --memory host --exchange --pieces $pieces --sizes 1M,16M,64M \
    --bytes 512M --no-perftest
done
grep -ah "ferry\|hierarchical\|auto\|exchange\|GB/s\| us" $CALL_DIR/tcp_*.log | grep -v "^#" | head -80
echo quit | nvidia-cuda-mps-control
call_end
