# Session 40 c1. run(kind nvidia-h100-x2, carry [".deps"]), ~330 s, from a
# checkout of exp/ar-ll128 (the LL128 one-shot for two ranks, NOTE [LL128 lines], src/allreduce/one_shot_ll128.cu;
# auto's one-shot calls above 2 MiB take it with FERRY_ALLREDUCE_LL128=1; compiled, ptxas 50 registers, no spills).
# Issue 23 item 5 (AllReduce bf16 4 / 16 MB >= 1.05x torch symm-mem two-shot; today 1.01 / 1.02x). Stages:
#   1. build; *AllReduce* on 2 ranks plain (Ll128OneShotEveryTypeAndOp builds its own AllReduce with the knob) and
#      with the knob for every AllReduce (-x FERRY_ALLREDUCE_LL128=1); the same on 3 shared ranks (knob inert);
#   2. A/B on one binary, 3 rounds, bf16 2-32 MB, auto (the pipelined one-shot) against auto with the knob, --check;
#   3. the torch bench (symm-mem one-shot / two-shot, NCCL in the same processes) with and without the knob;
#   4. if time is left: memcheck and racecheck of AllReduce.Ll128OneShotEveryTypeAndOp.
# Read: ab/table_ll128_.txt (new/base < 1: LL128 faster), torch_ar_*.log. A wrong result anywhere in stage 1 means
# the 128-byte line assumption fails here: record it, do not merge.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin ar_ll128 330
{ nvidia-smi -q | grep -iE "product name|bus id"; git log --oneline -1; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_python"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
KNOB=FERRY_ALLREDUCE_LL128=1
call_run tests 60 $M -np 2 $T --gtest_filter="*AllReduce*"
call_run tests_knob 60 $M -np 2 -x $KNOB $T --gtest_filter="*AllReduce*"
call_run tests_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 -x $KNOB $T --gtest_filter="AllReduce.*"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/tests*.log | head -12
grep -aq "FAILED  \]" $CALL_DIR/tests*.log && { echo "tests failed: no A/B"; call_end; exit 0; }
B=$ROOT/build-device/bench/ferry-bench
printf '#!/bin/bash\nexport %s\nexec %s "$@"\n' $KNOB "$B" > /tmp/ll128.sh && chmod +x /tmp/ll128.sh
call_ab ll128_ 3 $B /tmp/ll128.sh "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --algos auto --no-nccl --check
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for v in unset set; do
  if [ $v = unset ]; then set_knob="env -u FERRY_ALLREDUCE_LL128"; else set_knob="env $KNOB"; fi
  call_run torch_ar_$v 60 $set_knob python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    bench/python/ferry_torch_bench.py --what allreduce --sizes 2M:32M:2 --out $CALL_DIR/torch_ar_$v
  grep -aE "^ +[0-9]+M: ferry" $CALL_DIR/torch_ar_$v.log | tail -5
done
for tool in memcheck racecheck; do
  call_run $tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="AllReduce.Ll128OneShotEveryTypeAndOp"
done
call_end
