# Prepared in session 29 for a later session (NOT run). Issue 23, low latency's fixed chain: branch
# exp/tagged-counts (NOTE [EP tagged counts], destination_rows.cuh). A dispatch publishes its counts as tagged
# 8-byte words with no flag after them, so the counts cost one one-way NVLink trip instead of the writer's
# system-scope release (a round trip) plus the flag's trip; session 15's trace put "counts published" at 2.3 us and
# "every rank's counts seen" at 0.5-1 us of a ~20 us T=1 dispatch. Expected: ~1.5-2 us off every dispatch (low
# latency T=128 30.4 / 28.3 us today), ~1% of a high-throughput one.
# Before (here): rm -rf .ab; for t in base:main new:exp/tagged-counts; do d=.ab/${t%%:*}; mkdir -p $d;
#   git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]): bash docs/results/session29_2xH100/scripts/next_tagged_counts.sh
# (~480 s). Tests on the new tree (2 ranks, 3 / 8 sharing the GPUs, sanitizers, --check), then A/B base against new,
# NCCL beside: low latency 4 rounds, high throughput 2 (both contracts, 24 and 8 SMs).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
call_build_trees ferry-bench base new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
for n in 3 8; do
  call_run shared_np$n 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.*Bad*:EpRankRowsCases.Skew*:EpOwnRowsFirst.Skew*'
done
SF='Ep.BadExpertIdOnOneRank:Ep/EpMatrix.*ll_bf16*:EpOwnRowsFirst.GraphAndManyTokens:Ep.LowLatencyGraphReplayWithNewRouting'
for tool in memcheck racecheck synccheck; do
  call_run $tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"
done
call_run check 60 $M -np 2 $N ep --tokens 1,128,4096 --check --csv ''
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 8,24
call_end
