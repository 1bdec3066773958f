# Session 14, call 1 (nvidia-h100-x2). Three trees: main (build-device, ferry-bench: the A/B base of call 2),
# .ab/pipe = exp/net-pipelined-13 00764ed, .ab/ar = exp/ar-tail 1877b6f.
# Before, here: rm -rf .ab; mkdir -p .ab/pipe .ab/ar; git archive exp/net-pipelined-13 | tar -x -C .ab/pipe;
#               git archive exp/ar-tail | tar -x -C .ab/ar
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session14_2xH100/scripts/c1.sh 2>&1 | tail -70
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 560
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ln -sfn "$ROOT/.deps" .ab/pipe/.deps; ln -sfn "$ROOT/.deps" .ab/ar/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_pipe.log 2>&1)
(cd .ab/ar && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $CALL_DIR/cfg_ar.log 2>&1)
cmake --build build-device -j6 --target ferry-bench > $CALL_DIR/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j12 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests > $CALL_DIR/build_pipe.log 2>&1 & p2=$!
cmake --build .ab/ar/build -j12 --target ferry-bench ferry_gpu_tests > $CALL_DIR/build_ar.log 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p || echo "build $p failed"; done; grep -h " error" $CALL_DIR/build_*.log | head
rm -f $CALL_DIR/cfg_*.log $CALL_DIR/build_*.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"
# exp/ar-tail: variants 3/4/7 tested, racecheck of 7, A/B of 4/1/2/7 against 0 (main's kernel) in one binary.
AT=.ab/ar/build/tests/ferry_gpu_tests; AB=$ROOT/.ab/ar/build/bench/ferry-bench
for v in 3 4 7; do call_run ar_tests_v$v 60 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_VARIANT=$v $AT --gtest_filter="*AllReduce*"; done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ar_racecheck_v7 90 $M -np 2 -x FERRY_ONE_SHOT_PIPELINED_VARIANT=7 $SAN --tool racecheck --error-exitcode 86 $AT --gtest_filter="AllReduce.OneShotAboveTwoMiBEveryTypeAndOp"
mkdir -p $ROOT/.ab/wrap
for v in 0 1 2 4 7; do
  printf '#!/usr/bin/env bash\nexport FERRY_ONE_SHOT_PIPELINED_VARIANT=%s\nexec %s "$@"\n' $v "$AB" > $ROOT/.ab/wrap/v$v
  chmod +x $ROOT/.ab/wrap/v$v
done
for v in 4 1 2 7; do call_ab ar_v${v}_ 2 $ROOT/.ab/wrap/v0 $ROOT/.ab/wrap/v$v "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --check; done
# exp/net-pipelined-13: the suites a merge needs (A/Bs, faults and sanitizers in call 2).
T=.ab/pipe/build/tests/ferry_gpu_tests
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
IPC="$V -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
call_run pipe_ipc 60 $M -np 2 $IPC $T --gtest_filter="Ep*"
call_run pipe_sm 60 $M -np 2 $V -x UCX_TLS=sm,self $T --gtest_filter="Ep*"
call_run pipe_tcp 90 $M -np 2 $V -x UCX_TLS=tcp,self $T --gtest_filter="Ep*"
call_run pipe_2x2_direct 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $T --gtest_filter="Ep*"
call_run pipe_2x2_hier 90 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
call_run pipe_np2 60 $M -np 2 $T --gtest_filter="Ep*"
call_end
