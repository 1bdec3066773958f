# Session 14, call 4 (fresh machine): main as one tree after the merge of exp/net-pipelined-13 and the pipelined
# one-shot's dependent launch: the full GPU suite, torch's symmetric memory beside ferry's AllReduce (with and
# without the dependent launch, same run), sanitizers on the pipelined one-shot, the cross-node suites, killed peers.
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session14_2xH100/scripts/c4.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $CALL_DIR/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests ferry_python ferry_python_files > $CALL_DIR/build.log 2>&1 || { grep " error" $CALL_DIR/build.log | head; }
rm -f $CALL_DIR/cfg.log; echo "built in $(call_elapsed) s"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
S="-x FERRY_TEST_SHARE_GPUS=1"; XN="*AllReduce*:Ep*:Timeout.Hier*"
call_run np2 150 $M -np 2 $T
export PYTHONPATH="$ROOT/build-device/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/python/ferry_torch_bench.py --what allreduce --sizes 2M:32M:2"
for r in 1 2; do
  call_run torch_pdl_$r 60 $TR --out $CALL_DIR/torch_pdl_$r
  call_run torch_nopdl_$r 60 env FERRY_ALLREDUCE_PDL=0 $TR --out $CALL_DIR/torch_nopdl_$r
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck synccheck memcheck; do
  call_run san_ar_$tool 60 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="AllReduce.OneShotAboveTwoMiBEveryTypeAndOp"
done
call_run 2x1_sm 100 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter="$XN"
call_run 2x1_tcp 120 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter="$XN"
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
call_run faults 90 $U $F --gtest_filter='KilledPeer.*'
call_run faults_ipc 60 $U UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 $F --gtest_filter='KilledPeer.AcrossNodes'
call_run 2x2 120 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="$XN"
grep -H -E "^ +(4M|8M|16M): ferry" $CALL_DIR/torch_*.log | sed "s|.*/||"
call_end
