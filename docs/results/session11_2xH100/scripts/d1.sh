# Session 11 call 1: build main, exp/net-relay, exp/warm-params in parallel; relay's cross-node suites; warm's Ep tests + LL A/B vs main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/d1; mkdir -p $O; t0=$(date +%s)
nvidia-smi -L > $O/gpus.txt; cat $O/gpus.txt
for t in relay warm; do ln -sfn "$ROOT/.deps" .ab/$t/.deps; done
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
for t in relay warm; do (cd .ab/$t && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_$t.log 2>&1); done
cmake --build build-device -j6 --target ferry-bench ferry_gpu_tests > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/relay/build -j5 --target ferry_gpu_tests ferry-bench > $O/build_relay.log 2>&1 & p2=$!
cmake --build .ab/warm/build -j5 --target ferry-bench ferry_gpu_tests > $O/build_warm.log 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p || echo "build $p failed"; done
grep -h " error" $O/build_*.log | head
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none"; V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
F="*AllReduce*:Ep*:Timeout.Hier*"; R=.ab/relay/build/tests/ferry_gpu_tests
for tls in sm tcp; do timeout 100 $M -np 2 $V -x UCX_TLS=$tls,self $R --gtest_filter="$F" > $O/relay_2x1_$tls.log 2>&1; echo "relay_2x1_$tls rc=$?"; grep -E "FAILED|PASSED  \]" $O/relay_2x1_$tls.log | head -4; done
timeout 100 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $R --gtest_filter="Ep*" > $O/relay_2x2_direct.log 2>&1; echo "relay_2x2_direct rc=$?"; grep -E "FAILED|PASSED  \]" $O/relay_2x2_direct.log | head -4
echo "relay tests done at $(( $(date +%s) - t0 )) s"
timeout 100 $M -np 2 .ab/warm/build/tests/ferry_gpu_tests --gtest_filter="*Ep*" > $O/warm_ep_np2.log 2>&1; echo "warm Ep np2 rc=$?"; grep -E "FAILED|PASSED  \]" $O/warm_ep_np2.log | head -4
echo "warm tests done at $(( $(date +%s) - t0 )) s"
A=$O/ab_warm; mkdir -p $A
for r in 1 2 3; do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/warm/build/bench/ferry-bench
  timeout 60 $M -np 2 $b ep --mode ll --tokens 1,128,512 --csv $A/ab_ll_${s}_$r.csv > $A/ll_${s}_$r.log 2>&1 || echo "ll $s $r failed"; done; done
python3 scripts/ab_compare.py $A ll_ 2>&1 | grep -E "^(ferry|nccl)"
echo "ll ab done at $(( $(date +%s) - t0 )) s"
for r in 1 2; do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/warm/build/bench/ferry-bench
  timeout 60 $M -np 2 $b ep --mode ht --sms 8,24 --csv $A/ab_ht_${s}_$r.csv > $A/ht_${s}_$r.log 2>&1 || echo "ht $s $r failed"; done; done
python3 scripts/ab_compare.py $A ht_ 2>&1 | grep -E "^(ferry|nccl)"
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/d1.tgz . && find . -mindepth 1 -delete && mv /tmp/d1.tgz .
