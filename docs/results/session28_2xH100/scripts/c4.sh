# Session 28, c4: run(kind nvidia-h100-x2, carry [".deps"]) on branch exp/held-signals (issue 24).
# NOTE [Signals after the batch's puts] (src/net/proxy.cpp): the proxy holds the signals of the descriptors it
# finds ready at once and sends them behind one fence after the batch's puts (UCX's fence is a blocking worker
# flush), until FERRY_PROXY_HOLD_SIGNALS_BYTES (default 1 MiB) were put since the last fence; 0 = main's fence
# per signal. Tests over tcp and sm as 2x1 with the default, killed peers over tcp, then the proxy alone
# (ferry-bench net --exchange --pieces 16, host memory) at 0 / 1 MiB / 64 MiB, then A/B 0 against the default
# (one binary, the knob by wrapper) of AllReduce and EP over tcp and sm, NCCL beside in the same processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
call_build_dir build-device "ferry-bench ferry_gpu_tests ferry_gpu_fault_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests; B=build-device/bench/ferry-bench
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run tests_2x1_tcp 120 $M -np 2 $VN -x UCX_TLS=tcp,self $T --gtest_filter='Ep*:*AllReduce*'
call_run tests_2x1_sm 120 $M -np 2 $VN -x UCX_TLS=sm,self $T --gtest_filter='Ep*:*AllReduce*'
for tls in tcp sm; do
  call_run killed_$tls 90 env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY UCX_TLS=$tls,self \
    build-device/tests/ferry_gpu_fault_tests --gtest_filter='KilledPeer.AcrossNodes'
done
for tls in tcp sm; do
  for r in 1 2; do
    for h in 0 1048576 67108864; do
      echo "== $tls round $r hold $h" >> $CALL_DIR/exchange_$tls.txt
      timeout 60 $M -np 2 -x UCX_TLS=$tls,self -x FERRY_PROXY_HOLD_SIGNALS_BYTES=$h $B net --exchange --pieces 16 \
        --sizes 64K,256K,1M,4M,16M --bytes 64M 2>&1 | grep "^exchange" >> $CALL_DIR/exchange_$tls.txt
    done
  done
  echo "exchange $tls done ($(call_elapsed) s)"; cat $CALL_DIR/exchange_$tls.txt
done
for v in 0 1048576; do
  printf '#!/usr/bin/env bash\nexport FERRY_PROXY_HOLD_SIGNALS_BYTES=%s\nexec %s "$@"\n' $v "$ROOT/$B" > $CALL_DIR/h$v
  chmod +x $CALL_DIR/h$v
done
TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"; SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
call_ab ar_tcp_ 3 $CALL_DIR/h0 $CALL_DIR/h1048576 "$TCP" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16
call_ab ar_sm_ 2 $CALL_DIR/h0 $CALL_DIR/h1048576 "$SM" allreduce --sizes 256K,1M,4M,16M,64M --dtypes bf16
call_ab ep_sm_ 2 $CALL_DIR/h0 $CALL_DIR/h1048576 "$SM" ep --layout expanded
call_ab ep_tcp_ 2 $CALL_DIR/h0 $CALL_DIR/h1048576 "$TCP" ep --layout expanded
rm -f $CALL_DIR/h0 $CALL_DIR/h1048576
call_end
