# Session 47 c3. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~540 s. Trees (scripts/ab_trees.sh
# base=<main before the zero-copy combine> new=<main with it>): EpConfig::zero_copy_combine (NOTE [EP zero-copy
# combine], src/ep/rank_rows_pull_combine.cu) on GPUs for the first time.
# Stages: 1. new: the rank-rows suites on 2 GPUs; EpZeroCopy* and EpRankRows* on 3 ranks sharing the GPUs under MPS; memcheck /
# racecheck / synccheck on EpZeroCopyCombine.Refusals. 2. SASS of the copying rank-rows combine kernels, base against
# new (sum_rank_rows moved into rows.cuh). 3. A/B base / new, rank rows at 8 / 24 SMs, 2 rounds (the copying combine
# must not move). 4. new alone: rank rows without / with --zero-copy at 8 / 24 / 48 SMs, 3 rounds alternating, --check.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 560
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests
M2="$M -np 2"
call_run rr_2gpu 150 $M2 $T --gtest_filter="EpZeroCopy*:EpRankRows*:EpOwnRowsFirst*:EpRestricted*"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
call_run zc_3shared 120 $M -np 3 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1 \
  $T --gtest_filter="EpZeroCopy*:EpRankRowsCases.Skew*"
echo quit | nvidia-cuda-mps-control
for tool in memcheck racecheck synccheck; do
  call_run zc_$tool 90 $M2 $SAN --tool $tool --error-exitcode 9 $T --gtest_filter="EpZeroCopyCombine.Refusals"
done
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
for tree in base new; do
  cuobjdump -sass .ab/$tree/build/libferry.so 2>/dev/null | awk '/Function : .*rank_rows_combine_(send|recv)_kernel/{p=1}
    /Function : /&&!/rank_rows_combine_(send|recv)_kernel/{p=0} p' |
    sed -E 's@/\*[0-9a-f]{4}\*/@@; s@/\* 0x[0-9a-f]+ \*/@@; s/_GLOBAL__N__[0-9a-f]+_/X/g' > $CALL_DIR/rrc_$tree.sass
done
wc -l $CALL_DIR/rrc_*.sass; cmp $CALL_DIR/rrc_base.sass $CALL_DIR/rrc_new.sass && echo "copying combine SASS identical"
call_ab rr_ 2 $B $N "" ep --mode ht --layout rank_rows --sms 8,24 --iters 30 --warmup 3
for r in 1 2 3; do
  for zc in "" --zero-copy; do
    timeout 100 $M2 $N ep --mode ht --layout rank_rows --sms 8,24,48 --check --iters 30 --warmup 3 $zc \
      --csv $CALL_DIR/zc${zc:+_on}_$r.csv > $CALL_DIR/zc${zc:+_on}_$r.log 2>&1 || echo "zc round $r '$zc' failed"
  done
done
grep -h "check:" $CALL_DIR/zc*.log | sort | uniq -c
grep -h "^ht   rank_rows" $CALL_DIR/zc_on_3.log $CALL_DIR/zc_3.log
call_end
