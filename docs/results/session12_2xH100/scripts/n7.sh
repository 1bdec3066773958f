# Session 12 call 7: branch exp/ll-chunks (main + 1024-column LL chunks on 2 ranks up to 256 tokens).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n7; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L | tee $O/gpus.txt
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests > $O/build.log 2>&1 || { grep " error" $O/build.log | head; exit 1; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"
timeout 150 $M -np 2 build-device/tests/ferry_gpu_tests --gtest_filter="*Ep*" > $O/ep_np2.log 2>&1; echo "ep np2 rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]' $O/ep_np2.log | head -3 | tr '\n' ' ')"
mkdir -p $O/ab
for r in 1 2; do for s in base new; do x=(); [ $s = base ] && x=(-x FERRY_EP_CHUNK_COLS=2048)
  timeout 60 $M -np 2 "${x[@]}" build-device/bench/ferry-bench ep --mode ll --tokens 128,256,512 --check --csv $O/ab/ab_ll_${s}_$r.csv > $O/ab/ll_${s}_$r.log 2>&1 || echo "$s $r failed"; done; done
python3 scripts/ab_compare.py $O/ab ll_ 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_ll.txt
grep -h "check" $O/ab/ll_new_*.log | sort | uniq -c
echo "total $(el) s"
cd $O && tar czf /tmp/n7.tgz . && find . -mindepth 1 -delete && mv /tmp/n7.tgz .
