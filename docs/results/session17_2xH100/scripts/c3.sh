# Session 17, call 3 (nvidia-h100-x2): branch exp/net-range-helpers (feb28de, cherry-picked onto main bb447c9 as
# cand/net-range): one relay_ranges / take_relay_warp / wait_range_landed for the cross-node receive halves.
# SASS differs from main's (register allocation), so: A/B across 2 virtual nodes over sm and cuda_ipc, the cross-node
# suites and killed peers.
# Before: rm -rf .ab; for t in base:main new:cand/net-range; do d=.ab/${t%%:*}; mkdir -p $d;
#         git archive ${t#*:} | tar -x -C $d; done
# run(kind nvidia-h100-x2, carry [".deps",".ab"])
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 585
ferry_nccl_library_path
pids=()
for t in base new; do
  ln -sfn "$ROOT/.deps" .ab/$t/.deps
  targets="ferry-bench"; [ $t = new ] && targets="ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
  (cd .ab/$t && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_$t.log 2>&1 &&
   cmake --build build -j16 --target $targets > $CALL_DIR/build_$t.log 2>&1) & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
I="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_ab smll_ 3 $B $N "$V" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab smht_ 2 $B $N "$V" ep --layout expanded --no-nccl --mode ht
call_ab ipcll_ 2 $B $N "$I" ep --layout expanded --no-nccl --mode ll --tokens 1,128,512
call_ab ipcht_ 1 $B $N "$I" ep --layout expanded --no-nccl --mode ht
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests; F=.ab/new/build/tests/ferry_gpu_fault_tests
S="-x FERRY_TEST_SHARE_GPUS=1"; U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run 2x1_sm 60 $M -np 2 $V $T --gtest_filter='Ep*'
call_run 2x1_ipc 60 $M -np 2 $I $T --gtest_filter='Ep*'
call_run 2x2 80 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter='Ep*'
call_run 2x1_tcp 80 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*'
call_run faults 60 $U $F --gtest_filter='KilledPeer.AcrossNodes'
call_run san_memcheck 60 $M -np 2 $V $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep.TopkAboveEight'
call_end
