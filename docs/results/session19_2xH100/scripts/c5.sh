# Session 19, call 5 (nvidia-h100-x2): the final exp/ar-pieces (16 pieces, up to 64 blocks in pieces) against main
# 929c074: GPU suites and sanitizers of the final tree, the same-run A/B of the hierarchical AllReduce over sm, then
# issue 24's table (scripts/device_crossnode.sh, every stage) from the final tree.
# Before: rm -rf .ab; for t in base:929c074 new:exp/ar-pieces; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session19_2xH100/scripts/c5.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 570
ferry_nccl_library_path
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
call_build_trees ferry-bench base new+ferry_gpu_tests,ferry_gpu_window_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; WT=.ab/new/build/tests/ferry_gpu_window_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
SM="$VN -x UCX_TLS=sm,self"; TCP="$VN -x UCX_TLS=tcp,self"
call_run ar_2x1_sm 90 $M -np 2 $SM $T --gtest_filter='*AllReduce*:Timeout.Hier*'
call_run ar_2x2_sm 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $T --gtest_filter='*AllReduce*'
call_run ar_2x1_tcp 60 $M -np 2 $TCP $T --gtest_filter='*AllReduce*'
call_run win_2x1_sm 40 $M -np 2 $SM -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $WT
call_run san_memcheck 90 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*:AllReduce.LargeSums'
call_run san_racecheck 60 $M -np 2 $SM $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='All/AllReduceMatrix.*hierarchical*bf16*'
call_ab ar_sm_ 2 $B $N "$SM -x NCCL_P2P_DISABLE=1" allreduce --algos hierarchical --dtypes bf16 --sizes 256K,1M,4M,8M,16M,64M
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=100 BUILD_DIR=.ab/new/build \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink ar_tcp_zc ep_tcp_zc" \
  timeout $(( $(call_left) - 10 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
