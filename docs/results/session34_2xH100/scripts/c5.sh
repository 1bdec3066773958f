# Session 34, call 5. run(kind nvidia-h100-x2, carry [".deps"]), ~420 s.
# Main with c4's three duplicate mends merged (token routing helper, send_chunk through write_row_chunk,
# wait_last_count_words): the sanitizers on the kernels they touch (the staged fp8 and direct bf16 low-latency
# matrices inside a node, the cross-node pack over UCX shared memory), 3 ranks sharing the GPUs; then issue 24's
# shared-memory rows on this host (NCCL's shared memory beside) with the pcie floor of the same host.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c5 440
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_build_dir build-device "ferry-bench ferry_gpu_tests"
B=build-device/bench/ferry-bench; T=build-device/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
for tool in memcheck racecheck synccheck; do
  call_run $tool 70 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*ll_fp8*:Ep/EpMatrix.*ll_bf16*'
done
call_run memcheck_sm 70 $M -np 2 $SM $SAN --tool memcheck --error-exitcode 86 --report-api-errors no $T \
  --gtest_filter='Ep/EpMatrix.*ll_fp8*:Ep/EpMatrix.*ll_bf16*'
call_run ep_3shared 90 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep*'
call_run pcie 40 $M -np 2 $B pcie --sms 8,24 --csv $CALL_DIR/pcie.csv
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
call_run ep_sm 100 $M -np 2 $VN $B ep --layout expanded --csv $CALL_DIR/ep_sm.csv
grep -av "^\[" $CALL_DIR/pcie.log | tail -12; grep -aE "^(ht|ll) " $CALL_DIR/ep_sm.log
call_end
