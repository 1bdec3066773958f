# Session 39 c4. run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~470 s.
#   new = exp/bf16-dispatch-chunk 3219293 (main + the bf16 low-latency dispatch's 1024-column chunks on 2 ranks of
#   one node up to 512 tokens per rank); ar = exp/ar-two-shot-pipelined 73d8e85 (helper-prepared, NOT yet GPU-run:
#   the pipelined two-shot AllReduce, NOTE [Pipelined two-shot]; auto takes it with
#   FERRY_ALLREDUCE_TWO_RANK_ALGO=two_shot_pipelined). Trees: scripts/ab_trees.sh new=exp/bf16-dispatch-chunk
#   ar=exp/ar-two-shot-pipelined
# EP: the low-latency tests on new; A/B on new's binary, FERRY_EP_CHUNK_COLS=2048 (main's chunks above 128 tokens)
# as base against the default; figures. AR: the AllReduce suite (knob unset and set), racecheck, A/B auto against
# auto with the knob, the torch bench with and without it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 470
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
(cd .ab/ar && ln -sfn "$ROOT/.deps" .deps && call_build_dir build "ferry-bench ferry_gpu_tests ferry_python") &
ar_build=$!
call_build_trees ferry-bench new+ferry_gpu_tests
wait $ar_build
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
N="$ROOT/.ab/new/build/bench/ferry-bench"; SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_ll 90 $M -np 2 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.Staged*:Ep.TokensWithoutExperts:Ep.SkewAll*:Ep.HandleReuse*'
call_run ep_ll_np3 60 $M -np 3 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*'
if ! grep -aq "FAILED  \]" $CALL_DIR/ep_ll*.log; then
  printf '#!/bin/bash\nFERRY_EP_CHUNK_COLS=2048 exec %s "$@"\n' "$N" > /tmp/dc2048.sh && chmod +x /tmp/dc2048.sh
  call_ab bf16chunk_ 3 /tmp/dc2048.sh $N "" ep --mode ll --tokens 256,512
  call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
fi
A=.ab/ar/build; KNOB=FERRY_ALLREDUCE_TWO_RANK_ALGO=two_shot_pipelined
call_run ar_tests 60 $M -np 2 $A/tests/ferry_gpu_tests --gtest_filter="*AllReduce*"
call_run ar_tests_knob 60 $M -np 2 -x $KNOB $A/tests/ferry_gpu_tests --gtest_filter="*AllReduce*"
grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" $CALL_DIR/ar_tests*.log | head -12
grep -aq "FAILED  \]" $CALL_DIR/ar_tests*.log && { echo "AR tests failed: no A/B"; call_end; exit 0; }
AB="$ROOT/$A/bench/ferry-bench"
printf '#!/bin/bash\nexport %s\nexec %s "$@"\n' $KNOB "$AB" > /tmp/tsp.sh && chmod +x /tmp/tsp.sh
call_ab tsp_ 3 $AB /tmp/tsp.sh "" allreduce --dtypes bf16 --sizes 2M,4M,8M,16M,32M --algos auto --no-nccl --check
export PYTHONPATH="$ROOT/$A/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for v in unset two_shot_pipelined; do
  if [ $v = unset ]; then set_knob="env -u FERRY_ALLREDUCE_TWO_RANK_ALGO"; else set_knob="env $KNOB"; fi
  call_run torch_ar_$v 60 $set_knob python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    .ab/ar/bench/python/ferry_torch_bench.py --what allreduce --sizes 2M:32M:2 --out $CALL_DIR/torch_ar_$v
  grep -aE "^ +[0-9]+M" $CALL_DIR/torch_ar_$v.log | tail -5
done
call_run ar_racecheck 45 $M -np 2 $SAN --tool racecheck --error-exitcode 86 $A/tests/ferry_gpu_tests \
  --gtest_filter="All/AllReduceMatrix.EveryOpOddCountsUnalignedInPlace/two_shot_pipelined_bf16"
call_end
