# Session 12 call 8: main 28bc056; chunk columns for rank rows (HT, 24 SMs) and for LL across 2 virtual nodes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n8; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench > $O/build.log 2>&1 || { grep " error" $O/build.log | head; exit 1; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; B=build-device/bench/ferry-bench
for c in 8192 3584 2048; do
  timeout 40 $M -x FERRY_EP_CHUNK_COLS=$c $B ep --mode ht --layout rank_rows --csv $O/rr_c$c.csv > $O/rr_c$c.log 2>&1
  echo "rank rows chunk $c ($(el) s)"; awk -F, 'NR>1 {printf "  %-14s ferry %8s nccl %8s x %s\n", $3, $16, $19, $21}' $O/rr_c$c.csv
done
for c in 2048 1024; do
  timeout 40 $M -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 -x FERRY_EP_CHUNK_COLS=$c $B ep --mode ll --tokens 128 --csv $O/ll_sm_c$c.csv > $O/ll_sm_c$c.log 2>&1
  echo "ll over sm chunk $c ($(el) s)"; awk -F, 'NR>1 {printf "  %-14s ferry %8s nccl %8s x %s\n", $3, $16, $19, $21}' $O/ll_sm_c$c.csv
done
cd $O && rm -f build.log cfg.log && tar czf /tmp/n8.tgz . && find . -mindepth 1 -delete && mv /tmp/n8.tgz .
