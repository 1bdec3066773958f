# Session 47 c3 on one H200 (the 2-GPU kind was not lent at that moment): run(kind nvidia-h200, carry [".deps",
# ".ab"]), ~450 s. Trees as c3.sh. Correctness only (ranks share the GPU under MPS; no figure from this call):
# the rank-rows suites with EpConfig::zero_copy_combine on 2 and 3 shared ranks, the three sanitizers on
# EpZeroCopyCombine.Refusals (2 shared ranks), the copying combine's SASS base / new, and ferry-bench ep --check
# with --zero-copy.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 470
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d && echo "MPS started"
S="-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x FERRY_TEST_SHARE_GPUS=1"
call_run rr_2shared 150 $M -np 2 $S $T --gtest_filter="EpZeroCopy*:EpRankRows*:EpOwnRowsFirst*"
call_run zc_3shared 100 $M -np 3 $S $T --gtest_filter="EpZeroCopy*"
for tool in memcheck racecheck synccheck; do
  call_run zc_$tool 70 $M -np 2 $S $SAN --tool $tool --error-exitcode 9 $T --gtest_filter="EpZeroCopyCombine.Refusals"
done
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
for tree in base new; do
  cuobjdump -sass .ab/$tree/build/libferry.so 2>/dev/null | awk '/Function : .*rank_rows_combine_(send|recv)_kernel/{p=1}
    /Function : /&&!/rank_rows_combine_(send|recv)_kernel/{p=0} p' |
    sed -E 's@/\*[0-9a-f]{4}\*/@@; s@/\* 0x[0-9a-f]+ \*/@@; s/_GLOBAL__N__[0-9a-f]+_/X/g' > $CALL_DIR/rrc_$tree.sass
done
wc -l $CALL_DIR/rrc_*.sass; cmp $CALL_DIR/rrc_base.sass $CALL_DIR/rrc_new.sass && echo "copying combine SASS identical"
for zc in "" --zero-copy; do
  timeout 90 $M -np 2 $S $N ep --mode ht --layout rank_rows --sms 8,24 --check --iters 5 --warmup 1 $zc \
    --csv $CALL_DIR/zc${zc:+_on}_1xH200_2shared.csv > $CALL_DIR/zc${zc:+_on}_1xH200_2shared.log 2>&1 || echo "zc '$zc' failed"
done
grep -h "check:" $CALL_DIR/zc*.log
echo quit | nvidia-cuda-mps-control
call_end
