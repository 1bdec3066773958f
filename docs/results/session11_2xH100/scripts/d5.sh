# Session 11 call 5: DeepEP 567632d beside ferry (PYTHONPATH fix: the tests import deep_ep from the build tree).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/d5; mkdir -p $O; t0=$(date +%s); nvidia-smi -L > $O/gpus.txt
FERRY_DEEPEP_TIMEOUT=170 OUT=$O/deepep timeout 450 scripts/device_deepep.sh > $O/deepep.txt 2>&1; echo "deepep rc=$? ($(( $(date +%s) - t0 )) s)"; tail -40 $O/deepep.txt
cd $O && tar czf /tmp/d5.tgz . && find . -mindepth 1 -delete && mv /tmp/d5.tgz .
