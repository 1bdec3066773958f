# Session 18, call 1 (nvidia-h100-x2): branch exp/own-rows-first against main b588051.
#   EpConfig::own_rows_first (NOTE [EP own rows first]): rank rows with this rank's every token first, so the copy
#   engine writes the own rows (bf16, fp8 input) while every send block moves the peers' rows over NVLink.
# Before: rm -rf .ab; for t in base:main new:exp/own-rows-first; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session18_2xH100/scripts/c1.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 585
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; S="-x FERRY_TEST_SHARE_GPUS=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# The new side with the option (call_ab passes both sides the same arguments).
printf '#!/bin/sh\nexec %s "$@" --own-rows-first\n' "$PWD/$N" > .ab/new_own.sh; chmod +x .ab/new_own.sh
# Correct first: the new tests and the rank-rows matrix; the bench's check at the reference shape.
call_run own_np2 90 $M -np 2 $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows*'
call_run own_check 60 $M -np 2 .ab/new_own.sh ep --layout rank_rows --mode ht --sms 8,24 --check --no-nccl
grep -h -E "^ht |check" $CALL_DIR/own_check.log | head -12
# The gain: main's rank rows against the new side's own rows first (NCCL in the same processes).
AB_LAYOUT_ALIAS="rank_rows_own=rank_rows" call_ab own_ 3 $B .ab/new_own.sh "" ep --layout rank_rows --mode ht --sms 8,24,48
# No loss where the option is off (the rank-rows kernels changed: own-first branches).
call_ab rr_ 2 $B $N "" ep --layout rank_rows --mode ht --sms 24,48
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_run san_memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='EpOwnRowsFirst.SkewAndEdges'
call_run own_np4 70 $M -np 4 $S $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows.*fp8_h2048_k3*'
call_run san_racecheck 40 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='EpOwnRowsFirst.SkewAndEdges'
call_end
