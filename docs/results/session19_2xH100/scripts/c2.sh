# Session 19, call 2 (nvidia-h100-x2): branch exp/ar-pieces a9b05d7 (signal words mapped like the landing, the
# hierarchical AllReduce in pieces over mapped peers; own rows first's copy engine up to 10 send blocks) against
# main 929c074.
# Before: rm -rf .ab; for t in base:929c074 new:exp/ar-pieces; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session19_2xH100/scripts/c2.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_window_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; WT=.ab/new/build/tests/ferry_gpu_window_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self"; TCP="$VN -x UCX_TLS=tcp,self"
call_run win_2x1_sm 60 $M -np 2 $SM -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $WT
call_run ar_2x1_sm 90 $M -np 2 $SM $T --gtest_filter='*AllReduce*:Timeout.Hier*'
call_ab ar_sm_ 3 $B $N "$SM -x NCCL_P2P_DISABLE=1" allreduce --algos hierarchical --dtypes bf16 --sizes 256K,1M,4M,16M,64M
call_run ar_2x2_sm 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='*AllReduce*'
call_run ar_2x1_tcp 90 $M -np 2 $TCP $T --gtest_filter='*AllReduce*'
call_run san_memcheck 90 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*:AllReduce.GraphReplayWithNewData'
call_run san_racecheck 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*'
call_run ep_2x1_sm 80 $M -np 2 $SM $T --gtest_filter='Ep*'
printf '#!/bin/sh\nexec %s "$@" --own-rows-first\n' "$PWD/$N" > .ab/new_own.sh; chmod +x .ab/new_own.sh
printf '#!/bin/sh\nexec %s "$@" --own-rows-first\n' "$PWD/$B" > .ab/base_own.sh; chmod +x .ab/base_own.sh
call_ab own_ 2 .ab/base_own.sh .ab/new_own.sh "" ep --layout rank_rows --mode ht --sms 10,11 --no-nccl
call_run ar_pieces2 60 $M -np 2 $SM -x FERRY_HIERARCHICAL_PIECES=2 $T --gtest_filter='*AllReduce*'
call_run san_synccheck 50 $M -np 2 $SM $SAN --tool synccheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*'
call_end
