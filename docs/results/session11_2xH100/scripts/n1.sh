# Session 12 call 1 (prepared in session 11): main, exp/layout-pdl (.ab/pdl), exp/hier-mapped-source (.ab/hier), built side by side.
# Before the run, here: rm -rf .ab/*; for b in pdl:exp/layout-pdl hier:exp/hier-mapped-source; do mkdir -p .ab/${b%%:*}; git archive ${b#*:} | tar -x -C .ab/${b%%:*}; done
# run(kind nvidia-h100-x2, carry [".deps",".runs",".ab"]): bash .runs/n1.sh 2>&1 | tail -80
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n1; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L > $O/gpus.txt; cat $O/gpus.txt
for t in pdl hier; do ln -sfn "$ROOT/.deps" .ab/$t/.deps; done
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
for t in pdl hier; do (cd .ab/$t && ferry_device_cmake_args build && cmake "${cmake_args[@]}" > $O/cfg_$t.log 2>&1); done
cmake --build build-device -j10 --target ferry-bench ferry_gpu_tests > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/pdl/build -j10 --target ferry-bench ferry_gpu_tests > $O/build_pdl.log 2>&1 & p2=$!
cmake --build .ab/hier/build -j10 --target ferry-bench ferry_gpu_tests > $O/build_hier.log 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"
run() { local name=$1; shift; timeout 120 "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]' $O/$name.log | head -3 | tr '\n' ' ')"; }
run pdl_ep_np2 $M -np 2 .ab/pdl/build/tests/ferry_gpu_tests --gtest_filter="*Ep*"
F="*AllReduce*:Ep*:Timeout.Hier*"; H=.ab/hier/build/tests/ferry_gpu_tests
run hier_2x1_sm $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $H --gtest_filter="$F"
run hier_2x1_tcp $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $H --gtest_filter="$F"
run hier_2x2 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $H --gtest_filter="$F"
run hier_2x2_sm $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 -x UCX_TLS=sm,self $H --gtest_filter="$F"
ab() {  # ab TAG NEW_BIN ROUNDS ARGS...: base (main) and new alternating, CSVs into $O/ab
  local tag=$1 new=$2 rounds=$3; shift 3; mkdir -p $O/ab
  for r in $(seq 1 $rounds); do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=$new
    timeout 90 $M -np 2 $b "$@" --csv $O/ab/ab_${tag}${s}_$r.csv > $O/ab/${tag}${s}_$r.log 2>&1 || echo "$tag $s $r failed"; done; done
  python3 scripts/ab_compare.py $O/ab $tag 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_$tag.txt; echo "ab $tag done ($(el) s)"; }
ab pdl_ht_ .ab/pdl/build/bench/ferry-bench 2 ep --mode ht --sms 8,24,48
ab pdl_ll_ .ab/pdl/build/bench/ferry-bench 3 ep --mode ll --tokens 128,512
( export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=sm,self NCCL_P2P_DISABLE=1
  ab hier_ar_sm_ .ab/hier/build/bench/ferry-bench 2 allreduce --dtypes bf16 --sizes 1M,16M,64M )
echo "total $(el) s"
cd $O && tar czf /tmp/n1.tgz . && find . -mindepth 1 -delete && mv /tmp/n1.tgz .
