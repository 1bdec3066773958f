# Session 11 call 3: main (relay merged, 6145481): EP figures on 2xH100 with NCCL, then the three sanitizers (in parallel) on the small GPU tests, and memcheck on the cross-node (2x1 sm) EP cases.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/d3; mkdir -p $O; t0=$(date +%s)
nvidia-smi -L > $O/gpus.txt
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
cmake --build build-device -j16 --target ferry-bench ferry_gpu_tests > $O/build_main.log 2>&1 || { grep " error" $O/build_main.log | head; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none"; FB=build-device/bench/ferry-bench
timeout 120 $M -np 2 $FB ep --halves --check --csv $O/ep_2xH100_2ranks.csv > $O/ep_2xH100_2ranks.txt 2>&1; echo "ep figures rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 150 $M -np 2 $FB ep --mode ht --sms 4,8,16,24,48,132 --csv $O/ep_sms_2xH100_2ranks.csv > $O/ep_sms_2xH100_2ranks.txt 2>&1; echo "ep sms rc=$? ($(( $(date +%s) - t0 )) s)"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
FILTER="Heap.*:All/AllReduceMatrix.*/*_bf16:AllReduce.GraphReplayWithNewData:Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse:Ep.FusedAndSeparateLayoutAgree:Ep/EpRankRows.DispatchCombine/bf16_h2048_k3_le4:Ep/EpRankRows.DispatchCombine/fp8_h2048_k7_le1"
for tool in memcheck racecheck synccheck; do
  timeout 330 $M -np 2 -x FERRY_TIMEOUT_MS=120000 $SAN --tool $tool --error-exitcode 86 build-device/tests/ferry_gpu_tests --gtest_filter="$FILTER" > $O/$tool.log 2>&1 &
done
XF="Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse"
timeout 330 $M -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x FERRY_TIMEOUT_MS=120000 $SAN --tool memcheck --error-exitcode 86 build-device/tests/ferry_gpu_tests --gtest_filter="$XF" > $O/memcheck_2x1_sm.log 2>&1 &
wait
for f in memcheck racecheck synccheck memcheck_2x1_sm; do echo "$f: $(grep -E 'ERROR SUMMARY|PASSED  \]|FAILED  \]' $O/$f.log | sort | uniq -c | tr '\n' ';')"; done
echo "total $(( $(date +%s) - t0 )) s"
tail -30 $O/ep_2xH100_2ranks.txt
cd $O && tar czf /tmp/d3.tgz . && find . -mindepth 1 -delete && mv /tmp/d3.tgz .
