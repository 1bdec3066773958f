# Prepared in session 13 for the next one (not run): branch exp/ar-tail, the pipelined one-shot's experiment
# variants (NOTE [Pipelined one-shot variants], FERRY_ONE_SHOT_PIPELINED_VARIANT: bit 0 tail join, bit 1 warp
# polls, bit 2 dependent launch; bf16 sum only). Variant 0 is main's kernel (PTX identical), so one binary A/Bs all of them.
# Before, here: git checkout exp/ar-tail (this script is on main and the branch).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session13_2xH100/scripts/next_ar_tail.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin ar 560
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests > $CALL_DIR/build.log 2>&1 || { grep " error" $CALL_DIR/build.log | head; call_end; exit 1; }
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
for v in 3 4 7; do call_run tests_v$v 60 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_VARIANT=$v $T --gtest_filter="*AllReduce*"; done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run racecheck_v7 90 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_VARIANT=7 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter="AllReduce.OneShotAboveTwoMiBEveryTypeAndOp"
for v in 0 1 2 4 7; do  # one wrapper per variant: call_ab compares two binaries
  printf '#!/usr/bin/env bash\nexport FERRY_ONE_SHOT_PIPELINED_VARIANT=%s\nexec %s "$@"\n' $v "$ROOT/build-device/bench/ferry-bench" > $CALL_DIR/v$v
  chmod +x $CALL_DIR/v$v
done
for v in 4 1 2 7; do call_ab v${v}_ 2 $CALL_DIR/v0 $CALL_DIR/v$v "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --check; done
rm -f $CALL_DIR/v0 $CALL_DIR/v1 $CALL_DIR/v2 $CALL_DIR/v4 $CALL_DIR/v7
call_end
# Then, for the winner (if any), the same-run comparison issue 23 asks for: bench/python/ferry_torch_bench.py
# --what allreduce with FERRY_ONE_SHOT_PIPELINED_VARIANT set (needs the Python module: scripts/device_run.sh builds it).
