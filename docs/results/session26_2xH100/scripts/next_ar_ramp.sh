# Prepared in session 26 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]), ~330 s, on
# branch exp/ar-ramp (git checkout exp/ar-ramp first; this script is on main). The pipelined one-shot's steps ramp
# up from and down to F packs (NOTE [Pipelined one-shot ramp], src/allreduce/step_plan.hpp, unit test
# PipelinedStepPlan.*), F = FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS, 0 = equal steps; aimed at issue 23's AllReduce
# 4 / 16 MB >= 1.05x torch symm-mem (now 1.01-1.02x: ~9.8 us of the 22 us at 4 MB is the first and last step).
# The AllReduce suite with F = 128 and 256, racecheck; then one binary, F by wrapper, A/B against F = 0 at 2-32 MB
# (--check), and the torch bench (symm-mem one-shot / two-shot in the same run) at F = 0 and the best F.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ar_ramp 560
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for f in 128 256; do
  call_run tests_f$f 60 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=$f $T --gtest_filter="*AllReduce*"
done
call_run racecheck_f128 90 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=128 $SAN --tool racecheck \
  --error-exitcode 86 $T --gtest_filter="AllReduce.OneShotAboveTwoMiBEveryTypeAndOp"
for f in 0 64 128 256 512; do  # one wrapper per ramp: call_ab compares two binaries
  printf '#!/usr/bin/env bash\nexport FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=%s\nexec %s "$@"\n' $f \
    "$ROOT/build-device/bench/ferry-bench" > $CALL_DIR/f$f
  chmod +x $CALL_DIR/f$f
done
for f in 128 256 64 512; do
  call_ab f${f}_ 2 $CALL_DIR/f0 $CALL_DIR/f$f "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --check
done
rm -f $CALL_DIR/f0 $CALL_DIR/f64 $CALL_DIR/f128 $CALL_DIR/f256 $CALL_DIR/f512
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for f in 0 128; do  # set BEST to the A/B's winner if it is not 128
  [ "$(call_left)" -gt 70 ] || break
  FERRY_ONE_SHOT_PIPELINED_RAMP_PACKS=$f call_run torch_ar_f$f 60 python3 -m torch.distributed.run --standalone \
    --nproc-per-node 2 bench/python/ferry_torch_bench.py --what allreduce --sizes 2M:32M:2 --out $CALL_DIR/torch_ar_f$f
done
call_end
