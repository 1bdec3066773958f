# Session 13, call 3: branch exp/layout-lookback (NOTE [EP layout look-back]) against main (base = build-device).
# Before, here: rm -rf .ab/*; mkdir -p .ab/lookback; git archive exp/layout-lookback | tar -x -C .ab/lookback
# run(kind nvidia-h100-x2, carry [".deps",".ab"]): bash docs/results/session13_2xH100/scripts/c3.sh 2>&1 | tail -80
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/c3; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( 570 - $(el) )); }
finish() { echo "total $(el) s"; cd $O && rm -f build_*.log cfg_*.log && tar czf /tmp/c3.tgz . && find . -mindepth 1 -delete && mv /tmp/c3.tgz .; exit 0; }
nvidia-smi -L
ln -sfn "$ROOT/.deps" .ab/lookback/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/lookback && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $O/cfg_new.log 2>&1)
cmake --build build-device -j12 --target ferry-bench > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/lookback/build -j20 --target ferry-bench ferry_gpu_tests > $O/build_new.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head; echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"; T=.ab/lookback/build/tests/ferry_gpu_tests
run() { local name=$1 to=$2; shift 2; [ $(left) -lt 20 ] && { echo "$name skipped (time)"; return; }; [ $to -gt $(left) ] && to=$(left)
  timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY' $O/$name.log | sort | uniq -c | head -3 | tr '\n' ' ')"; }
run ep_np2 120 $M -np 2 $T --gtest_filter="*Ep*"
run ep_np4 150 $M -np 4 $S $T --gtest_filter="*Ep*"
run ep_np1 60 $M -np 1 $T --gtest_filter="*Ep*"
run ep_2x1_sm 90 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $T --gtest_filter="Ep*"
if grep -q "FAILED  \]" $O/ep_*.log; then grep -h "FAILED  \]" $O/ep_*.log | head; finish; fi
ab() {  # ab TAG ROUNDS ARGS...: main (base) and the branch (new) alternating
  local tag=$1 rounds=$2; shift 2; mkdir -p $O/ab
  for r in $(seq 1 $rounds); do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=.ab/lookback/build/bench/ferry-bench
    [ $(left) -lt 30 ] && { echo "ab $tag skipped (time)"; break 2; }
    timeout 90 $M -np 2 $b "$@" --csv $O/ab/ab_${tag}${s}_$r.csv > $O/ab/${tag}${s}_$r.log 2>&1 || echo "$tag $s $r failed"; done; done
  python3 scripts/ab_compare.py $O/ab $tag 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_$tag.txt; echo "ab $tag done ($(el) s)"; }
ab ht_ 3 ep --mode ht --sms 8,24,48 --check
ab ll_ 2 ep --mode ll --tokens 128,2048
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do run san_$tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="Ep.BadExpertIdsAcrossLayoutBlocks"; done
run ep_2x2 120 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="Ep*"
finish
