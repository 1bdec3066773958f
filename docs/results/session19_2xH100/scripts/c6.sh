# Session 19, call 6 (nvidia-h100-x2): main c7ba8f1 (= exp/ar-pieces aa8e2be + logs) as one tree: the cross-node suites
# the window change touches beyond call 5's (signal words UCX-allocated where UCX may map them: every window across
# nodes, EP's too): 2x2 (4 ranks on 2 GPUs), EP over tcp, killed peers (window teardown with UCX-owned signals);
# then EP high throughput over sm at 24/48/96 SMs (why the halves barely overlap: SMs or the link?).
# run(kind nvidia-h100-x2, carry [".deps"]): bash docs/results/session19_2xH100/scripts/c6.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 430
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; F=build-device/tests/ferry_gpu_fault_tests
S="-x FERRY_TEST_SHARE_GPUS=1"; XN="*AllReduce*:Ep*:Timeout.Hier*"
call_run 2x2 120 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="$XN"
U="env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY"
call_run faults 90 $U $F --gtest_filter='KilledPeer.*'
call_run ep_2x1_tcp 100 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $T --gtest_filter='Ep*:Timeout.Hier*'
B=build-device/bench/ferry-bench
for sms in 24 48 96; do
  call_run ht_sm_$sms 40 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 $B ep \
    --layout expanded --mode ht --sms $sms
  grep -h -E "^ht " $CALL_DIR/ht_sm_$sms.log
done
call_end
