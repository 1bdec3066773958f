# Session 20, call 4: branch exp/net-recv-one-trip (a705d53: the cross-node receive issues every load of a record's
# item before using any, NOTE [EP across nodes: one round trip per record]) against main 07f4607 (c3's tree, merged);
# then issue 24's table (scripts/device_crossnode.sh) from main 07f4607's build (the base tree).
# Before: rm -rf .ab; for t in base:main new:exp/net-recv-one-trip; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session20_2xH100/scripts/c4.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 575
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
IPC="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run ep_2x1_sm 60 $M -np 2 $SM $T --gtest_filter='Ep*'
call_run ep_2x2_direct 80 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self \
  -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter='Ep*'
call_run ep_2x1_tcp 50 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run ep_2x1_ipc 40 $M -np 2 $IPC $T --gtest_filter='Ep*'
call_run san_memcheck 50 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.DispatchCombine/*:Ep.HandleReuse'
call_ab ll_ 3 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ll --tokens 1,128,512
call_ab ht_ 2 $B $N "$SM -x NCCL_P2P_DISABLE=1" ep --layout expanded --mode ht
mkdir -p $CALL_DIR/crossnode
OUT=$CALL_DIR/crossnode FERRY_STAGE_TIMEOUT=90 BUILD_DIR=.ab/base/build \
  FERRY_CROSSNODE_STAGES="ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink ar_tcp_zc ep_tcp_zc" \
  timeout $(( $(call_left) - 10 )) scripts/device_crossnode.sh > $CALL_DIR/crossnode.txt 2>&1; echo "crossnode rc=$? ($(call_elapsed) s)"
grep -E "^(sm|tcp|cuda_ipc) " $CALL_DIR/crossnode/crossnode_table.txt
call_end
