# Session 51 c4 on one H200: run(kind nvidia-h200, carry [".deps"]), ~380 s, from a checkout of main. The sanitizers
# on the final main: device_run.sh's default sanitizer filter (heap, the bf16 AllReduce matrix, graph replay, small
# EP cases of both contracts) under memcheck, racecheck and synccheck, and the staged low-latency EP tests under
# racecheck and synccheck (call_ep_checks' filters), 2 ranks sharing the GPU under MPS.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 ${C4_BUDGET:-380}
call_build_dir build-device ferry_gpu_tests
T=$ROOT/build-device/tests/ferry_gpu_tests
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
F="Heap.*:All/AllReduceMatrix.*/*_bf16:AllReduce.GraphReplayWithNewData:Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3"
F="$F:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse:Ep.FusedAndSeparateLayoutAgree"
F="$F:Ep/EpRankRows.DispatchCombine/bf16_h2048_k3_le4:Ep/EpRankRows.DispatchCombine/fp8_h2048_k7_le1"
call_mps_start 2
ONE="-x FERRY_TEST_SHARE_GPUS=1"
for tool in memcheck racecheck synccheck; do
  call_run $tool 110 $M -np 2 $ONE $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$F"
done
for tool in racecheck synccheck; do
  call_run ${tool}_staged 90 $M -np 2 $ONE $SAN --tool $tool --error-exitcode 86 $T \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
done
call_mps_stop
grep -a "ERROR SUMMARY\|RACECHECK SUMMARY\|FAILED  \]" $CALL_DIR/*.log | sort | uniq -c
call_end
