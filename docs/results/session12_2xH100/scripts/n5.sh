# Session 12 call 5: main; low-latency EP knobs swept on 2x H100 (never tuned on 2 GPUs), two passes.
# run(kind nvidia-h100-x2, carry [".deps",".runs"]): bash .runs/n5.sh 2>&1 | tail -60
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n5; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L | tee $O/gpus.txt
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench > $O/build.log 2>&1 || { grep " error" $O/build.log | head; exit 1; }
echo "built in $(el) s"
export FERRY_TUNE_SWEEPS="ll:FERRY_EP_DISPATCH_RECV_BLOCKS=22,44,66,110 ll:FERRY_EP_COMBINE_RECV_BLOCKS=33,99 ll:FERRY_EP_CHUNK_COLS=1024,3584,7168"
for pass in 1 2; do
  OUT=$O/pass$pass timeout 240 scripts/tune_ep.sh --tokens 128 > $O/tune_pass$pass.log 2>&1
  echo "pass $pass rc=$? ($(el) s)"; cat $O/pass$pass/tune.txt
done
echo "total $(el) s"
cd $O && tar czf /tmp/n5.tgz . && find . -mindepth 1 -delete && mv /tmp/n5.tgz .
