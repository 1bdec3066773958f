# Session 49 c6 on one H200: run(kind nvidia-h200, carry [".deps"]), ~150 s. ONE rank: ferry-bench pcie-latency
# (new): one thread's host-memory load round trip and system fence, idle and while other SMs of the same GPU store
# 256 MB into pinned host memory: the mechanism c3 inferred (a GPU's host loads and system fences wait behind its
# queued host writes), measured. A figure of this GPU's link.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 ${C6_BUDGET:-170}
call_build_dir build ferry-bench
for round in 1 2; do
  call_run latency_$round 60 mpirun --allow-run-as-root --bind-to none -np 1 build/bench/ferry-bench pcie-latency \
    --sms 1,8,32,131 --bytes 256M
  cat $CALL_DIR/latency_$round.log
done
call_end
