# Session 16, call 3 (nvidia-h100-x2): the layout with one k-step instantiation, and the net template alone.
#   .ab/base = main; .ab/net = cand/net (main + exp/net-ll-template 6addea5);
#   .ab/k16  = cand/k16 (cand/inline = net + fe7e843's layout, but its k steps instantiated once, kMaxK = 16:
#              the send kernels shrink below main's, 6280 SASS instructions against 6792 for fp8; cand/inline
#              had 7560 and read fp8 T>=128 2.4-2.8% slower in c1/c2)
# Before: rm -rf .ab; for t in base:main net:cand/net k16:cand/k16; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"])
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 585
ferry_nccl_library_path
pids=()
for t in base net k16; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  targets="ferry-bench"; [ $t = k16 ] && targets="ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j10 --target $targets > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
B=.ab/base/build/bench/ferry-bench; N=.ab/net/build/bench/ferry-bench; K=.ab/k16/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_ab ll_k16_ 5 $B $K "" ep --mode ll --tokens 1,128,512
call_ab ht_k16_ 1 $B $K "" ep --mode ht --sms 24
call_ab smll_net_ 3 $B $N "$V" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smll_k16_ 3 $B $K "$V" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smht_k16_ 1 $B $K "$V" ep --layout expanded --no-nccl --mode ht
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/k16/build/tests/ferry_gpu_tests; F=.ab/k16/build/tests/ferry_gpu_fault_tests
S="-x FERRY_TEST_SHARE_GPUS=1"; U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
LT='Ep.TopkAboveEight:Ep.BadExpertIdOnOneRank:Ep.BadExpertIdsAcrossLayoutBlocks:Ep.FusedAndSeparateLayoutAgree'
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 60 $M -np 2 $T --gtest_filter='Ep*'
call_run layout_np4 40 $M -np 4 $S $T --gtest_filter="$LT"
call_run 2x1_sm 60 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter='Ep*'
call_run 2x1_ipc 60 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0 $T --gtest_filter='Ep*'
call_run 2x2 80 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter='Ep*'
call_run 2x1_tcp 80 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run faults 60 $U $F --gtest_filter='KilledPeer.AcrossNodes'
call_run san_memcheck 50 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep.TopkAboveEight'
call_run san_racecheck 50 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $T --gtest_filter='Ep.TopkAboveEight'
call_end
