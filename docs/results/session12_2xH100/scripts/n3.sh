# Session 12 call 3: main (build-device) and exp/hier-read-depth (.ab/depth).
# Before: rm -rf .ab/*; mkdir -p .ab/depth; git archive exp/hier-read-depth | tar -x -C .ab/depth
# run(kind nvidia-h100-x2, carry [".deps",".runs",".ab"]): bash .runs/n3.sh 2>&1 | tail -90
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n3; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L > $O/gpus.txt; cat $O/gpus.txt; git log --oneline -1 2>/dev/null
ln -sfn "$ROOT/.deps" .ab/depth/.deps
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg_main.log 2>&1
(cd .ab/depth && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF && cmake "${cmake_args[@]}" > $O/cfg_depth.log 2>&1)
cmake --build build-device -j16 --target ferry-bench ferry_gpu_tests ferry_python ferry_python_files > $O/build_main.log 2>&1 & p1=$!
cmake --build .ab/depth/build -j14 --target ferry-bench ferry_gpu_tests > $O/build_depth.log 2>&1 & p2=$!
for p in $p1 $p2; do wait $p || echo "build $p failed"; done; grep -h " error" $O/build_*.log | head
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"
run() { local name=$1; shift; timeout 150 "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]' $O/$name.log | head -3 | tr '\n' ' ')"; }
D=.ab/depth/build/tests/ferry_gpu_tests; F="*AllReduce*:Timeout.Hier*"
run depth_2x1_sm $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $D --gtest_filter="$F"
run depth_2x1_sm_b64 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x FERRY_HIERARCHICAL_BLOCKS=64 $D --gtest_filter="$F"
run depth_2x1_tcp $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=tcp,self $D --gtest_filter="$F"
run depth_2x2 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $D --gtest_filter="$F"
# AllReduce against torch symmetric memory (issue 23 item 5), one NVLink node of 2 GPUs.
( export PYTHONPATH=$ROOT/build-device/python; timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 1M,2M,4M,8M,16M,32M --out $O/torch > $O/torch_bench.log 2>&1
  echo "torch bench rc=$? ($(el) s)"; tail -25 $O/torch_bench.log )
# ferry's own 4/16 MB knobs on NVLink (no NCCL): one-shot blocks and step packs.
for kv in "" FERRY_ONE_SHOT_BLOCKS=96 FERRY_ONE_SHOT_BLOCKS=132 FERRY_ONE_SHOT_PIPELINED_STEP_PACKS=512 FERRY_TWO_SHOT_BLOCKS=96; do
  envx=(); [ -n "$kv" ] && envx=(-x "$kv")
  timeout 60 $M -np 2 "${envx[@]}" build-device/bench/ferry-bench allreduce --sizes 2M,4M,8M,16M --dtypes bf16 --algos auto,one_shot,two_shot --no-nccl --csv '' > $O/ar_knob_${kv:-default}.log 2>&1
  echo "== ${kv:-default}"; grep -E "^bf16" $O/ar_knob_${kv:-default}.log | head -6
done
ab() {  # ab TAG NEW_BIN ROUNDS ARGS...: base (main) and new alternating, CSVs into $O/ab
  local tag=$1 new=$2 rounds=$3; shift 3; mkdir -p $O/ab
  for r in $(seq 1 $rounds); do for s in base new; do b=build-device/bench/ferry-bench; [ $s = new ] && b=$new
    timeout 90 $M -np 2 $b "$@" --csv $O/ab/ab_${tag}${s}_$r.csv > $O/ab/${tag}${s}_$r.log 2>&1 || echo "$tag $s $r failed"; done; done
  python3 scripts/ab_compare.py $O/ab $tag 2>&1 | grep -E "^(ferry|nccl)" | tee $O/ab/table_$tag.txt; echo "ab $tag done ($(el) s)"; }
( export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=sm,self NCCL_P2P_DISABLE=1
  ab depth_sm_ .ab/depth/build/bench/ferry-bench 2 allreduce --dtypes bf16 --sizes 1M,16M,64M
  for b in 32 64; do FERRY_HIERARCHICAL_BLOCKS=$b ab depth_sm_b${b}_ .ab/depth/build/bench/ferry-bench 1 allreduce --dtypes bf16 --sizes 1M,16M,64M; done
  # EP over sm: does the receive half's 21 GB/s of host reads grow with SMs?
  timeout 120 $M -np 2 -x FERRY_TEST_SHARE_GPUS -x FERRY_RANKS_PER_NODE -x UCX_TLS -x NCCL_P2P_DISABLE build-device/bench/ferry-bench ep --mode ht --layout expanded --sms 24,48,96 --halves --csv $O/ep_sm_sms.csv > $O/ep_sm_sms.log 2>&1
  echo "ep sm sms rc=$? ($(el) s)"; grep -E "dispatch|combine|halves" $O/ep_sm_sms.log | tail -14 )
( export FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 UCX_TLS=tcp,self NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
  ab depth_tcp_ .ab/depth/build/bench/ferry-bench 1 allreduce --dtypes bf16 --sizes 1M,16M )
echo "total $(el) s"
cd $O && tar czf /tmp/n3.tgz . && find . -mindepth 1 -delete && mv /tmp/n3.tgz .
