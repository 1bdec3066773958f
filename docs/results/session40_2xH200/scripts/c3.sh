# Session 40 c3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), from a checkout of exp/ar-ll128 9cbcdcf (two ranks'
# one-shot calls above the LL range and up to 6 MiB take the LL128 one-shot by default), .ab/base = main 1ac6b6f.
#   1. build-device (this tree: bench, GPU tests, python) and .ab/base (bench), side by side;
#   2. *AllReduce* on 2 ranks; AllReduce.* on 3 and 8 shared ranks (LL128 inert there); memcheck, racecheck and
#      synccheck of AllReduce.Ll128OneShotEveryTypeAndOp;
#   3. A/B base (main) against new (this tree), auto, bf16 8 KiB - 32 MiB, 3 rounds, --check;
#   4. on the new binary: LL128 against LL below 128 KiB (FERRY_ALLREDUCE_LL_MAX_BYTES=0), 2 rounds;
#   5. the torch bench (symm-mem one-shot / two-shot, NCCL in the same processes), 256 KiB - 32 MiB.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 480
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
M="mpirun --allow-run-as-root --bind-to none"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_build_trees ferry-bench base &
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
wait
T=build-device/tests/ferry_gpu_tests; N=$ROOT/build-device/bench/ferry-bench; B=$ROOT/.ab/base/build/bench/ferry-bench
call_run tests 80 $M -np 2 $T --gtest_filter="*AllReduce*"
call_run tests_np3 80 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="AllReduce.*"
call_run tests_np8 90 $M -np 8 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="AllReduce.Ll128*:AllReduce.Fenced*"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/tests*.log | head -12
for tool in memcheck racecheck synccheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
done
grep -aq "FAILED  \]" $CALL_DIR/tests*.log && { echo "tests failed: no A/B"; call_end; exit 0; }
call_ab ar_ 3 $B $N "" allreduce --dtypes bf16 --sizes 8K,32K,64K,128K,192K,256K,512K,1M,2M,4M,6M,8M,16M,32M \
  --algos auto --no-nccl --check
printf '#!/bin/bash\nexport FERRY_ALLREDUCE_LL_MAX_BYTES=0\nexec %s "$@"\n' "$N" > /tmp/nol.sh && chmod +x /tmp/nol.sh
call_ab ll_ 2 $N /tmp/nol.sh "" allreduce --dtypes bf16 --sizes 4K,16K,32K,64K,128K --algos auto --no-nccl --check
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
call_run torch_ar 60 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 256K:32M:2 --out $CALL_DIR/torch_ar
grep -aE "^ +[0-9]+[KM]: ferry" $CALL_DIR/torch_ar.log | tail -9
call_end
