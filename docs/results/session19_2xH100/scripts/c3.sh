# Session 19, call 3 (nvidia-h100-x2): branch exp/ar-pieces (c2's tree + whole-block single pieces up to 64 KiB
# chunks, pieces of at least 16 KiB above; the proxy-path test expects no proxy traffic over mapped peers) against
# main 929c074.
# Before: rm -rf .ab; for t in base:929c074 new:exp/ar-pieces; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session19_2xH100/scripts/c3.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_window_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; WT=.ab/new/build/tests/ferry_gpu_window_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self"; TCP="$VN -x UCX_TLS=tcp,self"
call_run ar_2x1_sm 90 $M -np 2 $SM $T --gtest_filter='*AllReduce*:Timeout.Hier*'
call_ab ar_sm_ 3 $B $N "$SM -x NCCL_P2P_DISABLE=1" allreduce --algos hierarchical --dtypes bf16,fp32 --sizes 256K,1M,2M,4M,16M,64M
for kv in FERRY_HIERARCHICAL_BLOCKS=64 FERRY_HIERARCHICAL_PIECES=4 FERRY_HIERARCHICAL_PIECES=16; do
  call_run knob_$kv 40 $M -np 2 $SM -x $kv $N allreduce --algos hierarchical --dtypes bf16 --sizes 1M,4M,16M,64M --no-nccl
  echo "$kv"; grep -h -E "^bf16" $CALL_DIR/knob_$kv.log
done
call_run ar_2x2_sm 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='*AllReduce*'
call_run ar_pieces2 60 $M -np 2 $SM -x FERRY_HIERARCHICAL_PIECES=2 $T --gtest_filter='*AllReduce*'
call_run ar_pieces1 60 $M -np 2 $SM -x FERRY_HIERARCHICAL_PIECES=1 $T --gtest_filter='*AllReduce*'
call_run ar_2x1_tcp 90 $M -np 2 $TCP $T --gtest_filter='*AllReduce*'
call_run win_2x1_sm 60 $M -np 2 $SM -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $WT
call_run san_memcheck 90 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*:AllReduce.LargeSums:AllReduce.GraphReplayWithNewData'
call_run san_racecheck 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*:AllReduce.LargeSums'
call_run san_win 60 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $WT --gtest_filter='Window.MappedSignalsFollowTheirData'
call_ab ep_sm_ 1 $B $N "$SM" ep --layout expanded --mode ll --no-nccl
call_ab ep_sm_ht_ 1 $B $N "$SM" ep --layout expanded --mode ht --no-nccl
call_end
