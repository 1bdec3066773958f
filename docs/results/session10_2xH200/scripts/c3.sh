# Call 3: builds in parallel (new, base, trace), EP tests, sanitizers, A/B vs main, LL trace.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/x; mkdir -p $O; t0=$(date +%s)
ln -sf "$ROOT/.deps" .ab/base/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1
(cd .ab/base && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_base.log 2>&1)
FERRY_EP_TRACE=1 ferry_device_cmake_args build-trace; cmake "${cmake_args[@]}" > $O/cfg_trace.log 2>&1
cmake --build build-device -j12 --target ferry-bench ferry_gpu_tests > $O/build_new.log 2>&1 & p1=$!
cmake --build .ab/base/build -j10 --target ferry-bench > $O/build_base.log 2>&1 & p2=$!
cmake --build build-trace -j10 --target ferry-bench > $O/build_trace.log 2>&1 & p3=$!
wait $p1 || { grep -E "error" $O/build_new.log | head; exit 1; }; wait $p2; wait $p3
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"
timeout 200 $M build-device/tests/ferry_gpu_tests --gtest_filter="*Ep*" > $O/ep_tests.log 2>&1; echo "ep tests rc=$?"; grep -E "FAILED|PASSED" $O/ep_tests.log | head -8
$M build-trace/bench/ferry-bench ep --mode ll --no-nccl --csv "" --tokens 128 --dispatch-types bf16 > $O/trace_ll.log 2>&1; grep "rank 0 dispatch_send" $O/trace_ll.log | tail -8
OUT=$O/ab FERRY_AB_NP=2 FERRY_AB_ROUNDS=2 FERRY_AB_TAG=ht_ scripts/ab_bench.sh ep --mode ht --sms 8,16,24,48 > $O/ab_ht.log 2>&1; echo "ab ht rc=$?"
OUT=$O/ab FERRY_AB_NP=2 FERRY_AB_ROUNDS=3 FERRY_AB_TAG=ll_ scripts/ab_bench.sh ep --mode ll --tokens 128,512 > $O/ab_ll.log 2>&1; echo "ab ll rc=$?"
python3 scripts/ab_compare.py $O/ab ht_ 2>&1 | tail -40; python3 scripts/ab_compare.py $O/ab ll_ 2>&1 | tail -14
for tool in memcheck racecheck; do timeout 150 $M compute-sanitizer --tool $tool --error-exitcode 3 build-device/tests/ferry_gpu_tests --gtest_filter="Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIdOnOneRank" > $O/san_$tool.log 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|hazard|PASSED|FAILED" $O/san_$tool.log | head -4; done
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/c3.tgz . && find . -mindepth 1 -delete && mv /tmp/c3.tgz .
