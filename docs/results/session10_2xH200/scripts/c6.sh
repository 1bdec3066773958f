# Call 6: cross-node relays (NOTE [EP across nodes: one waiter per grid]): tests over sm/tcp and 2x2 direct, A/B vs main over sm.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/x; mkdir -p $O; t0=$(date +%s)
ln -sf "$ROOT/.deps" .ab/base/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1
(cd .ab/base && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_base.log 2>&1)
cmake --build build-device -j20 --target ferry-bench ferry_gpu_tests > $O/build_new.log 2>&1 & p1=$!
cmake --build .ab/base/build -j12 --target ferry-bench > $O/build_base.log 2>&1 & p2=$!
wait $p1 || { grep -E "error" $O/build_new.log | head; exit 1; }; wait $p2
echo "built in $(( $(date +%s) - t0 )) s"
M="mpirun --allow-run-as-root --bind-to none"; V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
F="*AllReduce*:Ep*:Timeout.Hier*"
for tls in sm tcp; do timeout 100 $M -np 2 $V -x UCX_TLS=$tls,self build-device/tests/ferry_gpu_tests --gtest_filter="$F" > $O/nodes_2x1_$tls.log 2>&1; echo "nodes_2x1_$tls rc=$?"; grep -E "FAILED|PASSED  \]" $O/nodes_2x1_$tls.log | head -4; done
timeout 100 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 build-device/tests/ferry_gpu_tests --gtest_filter="Ep*" > $O/nodes_2x2_direct.log 2>&1; echo "nodes_2x2_direct rc=$?"; grep -E "FAILED|PASSED  \]" $O/nodes_2x2_direct.log | head -4
echo "tests done at $(( $(date +%s) - t0 )) s"
export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=sm,self NCCL_P2P_DISABLE=1
OUT=$O/ab FERRY_AB_NP=2 FERRY_AB_ROUNDS=2 FERRY_AB_TAG=sm_ timeout 200 scripts/ab_bench.sh ep --layout expanded > $O/ab_sm.log 2>&1; echo "ab sm rc=$?"
python3 scripts/ab_compare.py $O/ab sm_ 2>&1 | grep -E "^(ferry|nccl)"
echo "total $(( $(date +%s) - t0 )) s"
cd $O && tar czf /tmp/c6.tgz . && find . -mindepth 1 -delete && mv /tmp/c6.tgz .
