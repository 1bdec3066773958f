# Session 40 c7. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), from a checkout of main 73af060 with
# patches/ll128_push2.patch applied (the LL128 one-shot's push warps keep 2 units in flight, not 4; c6: 0.978 at
# 4 MiB, 0.978-1.007 from 256 KiB to 6 MiB), .ab/base = main. The GPU tests of the change, the A/B again, the torch
# bench.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c7 250
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base &
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
wait
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench; B=$ROOT/.ab/base/build/bench/ferry-bench
call_run tests 60 $M -np 2 $T --gtest_filter="*AllReduce*"
call_run racecheck 40 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T \
  --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/tests*.log | head -12
call_ab p2_ 3 $B $N "" allreduce --dtypes bf16 --sizes 128K,256K,1M,2M,3M,4M,6M,8M --algos auto --no-nccl --check
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run torch_ar 50 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 1M:16M:2 --out $CALL_DIR/torch_ar
grep -aE "^ +[0-9]+[KM]: ferry" $CALL_DIR/torch_ar.log | tail -5
call_end
