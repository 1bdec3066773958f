# Session 11 call 2: main + exp/net-relay (both with the landing-registration fix 6bdf9fd): 2x2 suites, relay A/B over sm vs main.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/d2; mkdir -p $O; t0=$(date +%s)
nvidia-smi -L > $O/gpus.txt
ln -sfn "$ROOT/.deps" .ab/relay/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/relay && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_relay.log 2>&1)
cmake --build build-device -j8 --target ferry-bench ferry_gpu_tests ferry_gpu_window_tests > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/relay/build -j8 --target ferry_gpu_tests ferry-bench > $O/build_relay.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done
grep -h " error" $O/build_*.log | head
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"
F="*AllReduce*:Ep*:Timeout.Hier*"; R=.ab/relay/build/tests/ferry_gpu_tests; B=build-device/tests/ferry_gpu_tests
run() { local name=$1; shift; timeout 150 "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAILED  \]|PASSED  \]" $O/$name.log | head -4; }
run main_2x2_direct $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $B --gtest_filter="Ep*"
run relay_2x2_direct $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $R --gtest_filter="Ep*"
run relay_2x2 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $R --gtest_filter="$F"
run relay_2x1_sm $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $R --gtest_filter="$F"
run main_win_2x2 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 build-device/tests/ferry_gpu_window_tests
export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=sm,self NCCL_P2P_DISABLE=1
A=$O/ab_relay; mkdir -p $A
for r in 1 2; do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/relay/build/bench/ferry-bench
  timeout 90 $M -np 2 $b ep --layout expanded --csv $A/ab_sm_${s}_$r.csv > $A/sm_${s}_$r.log 2>&1 || echo "sm $s $r failed"; done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
python3 scripts/ab_compare.py $A sm_ 2>&1 | grep -E "^(ferry|nccl)"
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/d2.tgz . && find . -mindepth 1 -delete && mv /tmp/d2.tgz .
