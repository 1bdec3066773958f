# Session 18, call 5 (nvidia-h100-x2): branch exp/own-rows-first (final) against main b588051: the one rank-rows grid
# only on at most 8 SMs (c4: it lost at 16 and 48), tests with the SM hog on the one grid, A/B.
# Before: rm -rf .ab; for t in base:main new:exp/own-rows-first; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session18_2xH100/scripts/c5.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 330
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; S="-x FERRY_TEST_SHARE_GPUS=1"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
printf '#!/bin/sh\nexec %s "$@" --own-rows-first\n' "$PWD/$N" > .ab/new_own.sh; chmod +x .ab/new_own.sh
call_run own_np2 90 $M -np 2 $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows*:EpRestrictedSms.*'
call_run check 60 $M -np 2 $N ep --layout rank_rows --mode ht --sms 8,24 --check --no-nccl
call_run own_check 60 $M -np 2 .ab/new_own.sh ep --layout rank_rows --mode ht --sms 8,24 --check --no-nccl
grep -h "check:" $CALL_DIR/check.log $CALL_DIR/own_check.log
call_ab rr_ 3 $B $N "" ep --layout rank_rows --mode ht --sms 8,16,24,48
AB_LAYOUT_ALIAS="rank_rows_own=rank_rows" call_ab own_ 2 $B .ab/new_own.sh "" ep --layout rank_rows --mode ht --sms 8,24
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_run san_memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='EpOwnRowsFirst.GraphAndManyTokens:EpOwnRowsFirst.SkewAndEdges'
call_run san_racecheck 40 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='EpOwnRowsFirst.SkewAndEdges'
call_run san_synccheck 40 $M -np 2 $SAN --tool synccheck --error-exitcode 86 $T --gtest_filter='EpOwnRowsFirst.SkewAndEdges'
call_run own_np4 60 $M -np 4 $S $T --gtest_filter='EpOwnRowsFirst.*:*EpRankRows.*fp8_h2048_k3*:EpRankRowsCases.SkewZeroTokensFp8InputManyTokens'
call_end
