# Session 11 call 6: exp/net-pipelined (cross-node pipelined ranges) suites + A/B over sm vs main; DeepEP 567632d built alongside, its tests after.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/d6; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L > $O/gpus.txt
DE=$O/deepep_src; cp -r .deps/DeepEP $DE
(cd $DE && MAX_JOBS=8 CPATH=/usr/local/cuda/include/cccl TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace > $O/deepep_build.log 2>&1; echo "deepep built rc=$? at $(el) s") & pd=$!
ln -sfn "$ROOT/.deps" .ab/pipe/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/pipe && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_pipe.log 2>&1)
cmake --build build-device -j12 --target ferry-bench > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/pipe/build -j12 --target ferry_gpu_tests ferry-bench > $O/build_pipe.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head
echo "ferry built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"
F="*AllReduce*:Ep*:Timeout.Hier*"; P=.ab/pipe/build/tests/ferry_gpu_tests
run() { local name=$1; shift; timeout 90 "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]' $O/$name.log | head -3 | tr '\n' ' ')"; }
run pipe_2x1_sm $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $P --gtest_filter="$F"
run pipe_2x1_tcp $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $P --gtest_filter="$F"
run pipe_2x2_direct $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 -x FERRY_EP_HIERARCHICAL=0 $P --gtest_filter="Ep*"
A=$O/ab_pipe; mkdir -p $A
( export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=sm,self NCCL_P2P_DISABLE=1
for r in 1 2; do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/pipe/build/bench/ferry-bench
  timeout 60 $M -np 2 $b ep --layout expanded --csv $A/ab_sm_${s}_$r.csv > $A/sm_${s}_$r.log 2>&1 || echo "sm $s $r failed"; done; done )
python3 scripts/ab_compare.py $A sm_ 2>&1 | grep -E "^(ferry|nccl)"; echo "ab done at $(el) s"
wait $pd
left=$(( 440 - $(el) )); echo "deepep tests get $left s"
if [ $left -gt 40 ]; then
  (cd $DE && PYTHONPATH=$DE timeout $(( left * 2 / 3 )) python3 tests/test_intranode.py --num-processes 2 --num-tokens 4096 --hidden 7168 --num-topk 8 --num-experts 256) > $O/deepep_intranode.log 2>&1; echo "intranode rc=$? ($(el) s)"
  left=$(( 450 - $(el) ))
  (cd $DE && PYTHONPATH=$DE timeout $left python3 tests/test_low_latency.py --num-processes 2 --num-tokens 128 --hidden 7168 --num-topk 8 --num-experts 256) > $O/deepep_low_latency.log 2>&1; echo "ll rc=$? ($(el) s)"
fi
grep -h "\[tuning\] Best\|\[layout\]" $O/deepep_intranode.log | head -20
grep -hiE "bandwidth|avg_t|us" $O/deepep_low_latency.log | grep -v "^\[config\]" | head -12
rm -rf $DE
cd $O && tar czf /tmp/d6.tgz . && find . -mindepth 1 -delete && mv /tmp/d6.tgz .
