# Prepared in session 14 for the next one (not run): branch exp/ar-ce, the copy-engine one-shot AllReduce inside the
# library (NOTE [Copy-engine one-shot], FERRY_ALLREDUCE_CE_MIN_BYTES, FERRY_ONE_SHOT_CE_CHUNKS; off unless set). Run it
# after the ce-allreduce probe (session 15 ran it: it lost everywhere, so this was not run) says the "+hs" rows beat ferry at 4 MB; skip it otherwise.
# Before, here: rm -rf .ab; mkdir -p .ab/ce; git archive exp/ar-ce | tar -x -C .ab/ce
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session14_2xH100/scripts/next_ar_ce.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin ar_ce 560
ln -sfn "$ROOT/.deps" .ab/ce/.deps
cd .ab/ce && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && ferry_nccl_library_path && cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1; cd "$ROOT"
cmake --build .ab/ce/build -j30 --target ferry-bench ferry_gpu_tests > $CALL_DIR/build.log 2>&1 || grep " error" $CALL_DIR/build.log | head
rm -f $CALL_DIR/cfg.log $CALL_DIR/build.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/ce/build/tests/ferry_gpu_tests; B=$ROOT/.ab/ce/build/bench/ferry-bench
call_run ce_test 90 $M -np 2 $T --gtest_filter="AllReduce.CopyEngineOneShotEveryTypeAndOp"
call_run ar_ce_all 150 $M -np 2 -x FERRY_ALLREDUCE_CE_MIN_BYTES=1 $T --gtest_filter="*AllReduce*"
call_run ar_ce_2m 120 $M -np 2 -x FERRY_ALLREDUCE_CE_MIN_BYTES=2097153 $T --gtest_filter="*AllReduce*"
call_run ar_ce_shared 120 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_ALLREDUCE_CE_MIN_BYTES=1 $T --gtest_filter="AllReduce.*"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  call_run san_$tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="AllReduce.CopyEngineOneShotEveryTypeAndOp"
done
mkdir -p $ROOT/.ab/wrap
printf '#!/usr/bin/env bash\nexec %s "$@"\n' "$B" > $ROOT/.ab/wrap/base
for c in 1 2 4 8 16; do
  printf '#!/usr/bin/env bash\nexport FERRY_ALLREDUCE_CE_MIN_BYTES=2097153 FERRY_ONE_SHOT_CE_CHUNKS=%s\nexec %s "$@"\n' $c "$B" > $ROOT/.ab/wrap/ce$c
done
chmod +x $ROOT/.ab/wrap/*
for c in 4 1 16 2 8; do call_ab ce${c}_ 2 $ROOT/.ab/wrap/base $ROOT/.ab/wrap/ce$c "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --check; done
call_end
# Then, for the best chunk count, the torch bench with and without it (needs the Python module: build ferry_python
# ferry_python_files in .ab/ce/build and PYTHONPATH=.ab/ce/build/python), as c4.sh did for the dependent launch.
