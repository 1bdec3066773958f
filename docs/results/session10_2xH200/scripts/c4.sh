# Call 4: builds (new = this tree, base = main), EP tests, cross-node suites over sm and tcp, A/B vs main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/x; mkdir -p $O; t0=$(date +%s)
ln -sf "$ROOT/.deps" .ab/base/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1
(cd .ab/base && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_base.log 2>&1)
cmake --build build-device -j20 --target ferry-bench ferry_gpu_tests ferry_gpu_window_tests > $O/build_new.log 2>&1 & p1=$!
cmake --build .ab/base/build -j12 --target ferry-bench > $O/build_base.log 2>&1 & p2=$!
wait $p1 || { grep -E "error" $O/build_new.log | head; exit 1; }; wait $p2
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none -np 2"; V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
timeout 200 $M build-device/tests/ferry_gpu_tests --gtest_filter="*Ep*" > $O/ep_tests_np2.log 2>&1; echo "ep tests rc=$?"; grep -E "FAILED|PASSED  \]" $O/ep_tests_np2.log | head -4
for tls in sm tcp; do timeout 150 $M $V -x UCX_TLS=$tls,self build-device/tests/ferry_gpu_tests --gtest_filter="*AllReduce*:Ep*:Timeout.Hier*" > $O/nodes_2x1_$tls.log 2>&1; echo "nodes_2x1_$tls rc=$?"; grep -E "FAILED|PASSED  \]" $O/nodes_2x1_$tls.log | head -4; done
OUT=$O/ab FERRY_AB_NP=2 FERRY_AB_ROUNDS=2 FERRY_AB_TAG=ht_ scripts/ab_bench.sh ep --mode ht --sms 8,16,24,48 > $O/ab_ht.log 2>&1; echo "ab ht rc=$?"
OUT=$O/ab FERRY_AB_NP=2 FERRY_AB_ROUNDS=3 FERRY_AB_TAG=ll_ scripts/ab_bench.sh ep --mode ll --tokens 128,512 > $O/ab_ll.log 2>&1; echo "ab ll rc=$?"
python3 scripts/ab_compare.py $O/ab ht_ 2>&1 | grep -E "^ferry"; python3 scripts/ab_compare.py $O/ab ll_ 2>&1 | grep -E "^ferry|^nccl"
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/c4.tgz . && find . -mindepth 1 -delete && mv /tmp/c4.tgz .
