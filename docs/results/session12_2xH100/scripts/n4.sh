# Session 12 call 4: branch exp/symmetric-input (main + AllReduce::run_symmetric) in build-device.
# run(kind nvidia-h100-x2, carry [".deps",".runs"]): bash .runs/n4.sh 2>&1 | tail -100
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
O=$OUT/n4b; mkdir -p $O; t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi -L | tee $O/gpus.txt
ferry_device_cmake_args build-device; ferry_nccl_library_path; cmake "${cmake_args[@]}" > $O/cfg.log 2>&1
cmake --build build-device -j30 --target ferry-bench ferry_gpu_tests ferry_python ferry_python_files > $O/build.log 2>&1 || { grep " error" $O/build.log | head; exit 1; }
echo "built in $(el) s"
M="mpirun --allow-run-as-root --bind-to none"; S="-x FERRY_TEST_SHARE_GPUS=1"; T=build-device/tests/ferry_gpu_tests
run() { local name=$1 to=$2; shift 2; timeout $to "$@" > $O/$name.log 2>&1; echo "$name rc=$? ($(el) s) $(grep -E 'FAILED  \]|PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK' $O/$name.log | sort | uniq -c | head -4 | tr '\n' ' ')"; }
run np2_allreduce 200 $M -np 2 $T --gtest_filter="*AllReduce*"
# Figures: ferry (any pointer, and symmetric input) against NCCL, then against torch symmetric memory.
timeout 120 $M -np 2 build-device/bench/ferry-bench allreduce --dtypes bf16 --sizes 1M,2M,4M,8M,16M,32M,64M --algos auto,one_shot,two_shot,symmetric --check --csv $O/allreduce_2xH100.csv > $O/allreduce_2xH100.txt 2>&1
echo "ferry-bench allreduce rc=$? ($(el) s)"; tail -12 $O/allreduce_2xH100.txt
( export PYTHONPATH=$ROOT/build-device/python; timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  bench/python/ferry_torch_bench.py --what allreduce --sizes 1M,2M,4M,8M,16M,32M --out $O/torch > $O/torch_bench.log 2>&1
  echo "torch bench rc=$? ($(el) s)"; tail -14 $O/torch_bench.log
  timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m pytest -q -p no:cacheprovider tests/python/test_gpu_allreduce.py > $O/pytest_allreduce.log 2>&1
  echo "pytest allreduce rc=$? ($(el) s) $(tail -1 $O/pytest_allreduce.log)" )
# (done in call 4a) run 2x1_sm 150 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self -x FERRY_TEST_EXPECT_MAPPED_PEERS=1 $T --gtest_filter="*AllReduce*:Timeout.Hier*"
run np4_symmetric 120 $M -np 4 $S $T --gtest_filter="AllReduceSymmetric.*"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SF="AllReduceSymmetric.InputRewrittenRightAfterEachCall:AllReduceSymmetric.GraphReplayWithNewData:AllReduceSymmetric.BadArguments*"
for tool in memcheck racecheck synccheck; do run san_$tool 150 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"; done
# (done in call 4a) run san_memcheck_2x1_sm 150 $M -np 2 $S -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter="All/AllReduceMatrix.*/hierarchical*_bf16"
for b in 32 64 96; do timeout 60 $M -np 2 -x FERRY_ONE_SHOT_BLOCKS=$b build-device/bench/ferry-bench allreduce --dtypes bf16 --sizes 1M,4M,16M,32M --algos symmetric --no-nccl --csv '' > $O/symm_blocks_$b.txt 2>&1; echo "== symmetric, at most $b blocks"; grep -E "^bf16" $O/symm_blocks_$b.txt; done
# (done in call 4a) run 2x2 200 $M -np 4 $S -x FERRY_RANKS_PER_NODE=2 $T --gtest_filter="*AllReduce*"
echo "total $(el) s"
cd $O && tar czf /tmp/n4.tgz . && find . -mindepth 1 -delete && mv /tmp/n4.tgz .
