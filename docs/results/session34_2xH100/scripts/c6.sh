# Session 34, call 6 (review mends). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~380 s.
#   base = main c242f51 (the probes' mends: CopyProbeTable, no_mismatches_on_any_rank, pcie's direction predicates)
#   new  = exp/send-chunk-routing: send_chunk through load_token_routing / write_token_record (dispatch_send_kernel's
#          SASS differs: 80 lines shorter)
# Before (here): scripts/ab_trees.sh base=main new=exp/send-chunk-routing
# The probes on base's final code (nvlink, pcie); Ep* and memcheck of the ll matrices on new; A/B ll 3 rounds,
# ht expanded + rank rows 1 round.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 370
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_run nvlink 40 $M -np 2 $B nvlink --sms 8,24,132 --csv $CALL_DIR/nvlink.csv
call_run pcie 40 $M -np 2 $B pcie --sms 8,24 --csv $CALL_DIR/pcie.csv
call_run ep_new 90 $M -np 2 $T --gtest_filter='Ep*'
call_run memcheck 60 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*ll_bf16*:Ep/EpMatrix.*ll_fp8*'
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ht_ 1 $B $N "" ep --mode ht --sms 24
grep -av "^\[" $CALL_DIR/nvlink.log | tail -12; grep -av "^\[" $CALL_DIR/pcie.log | tail -12
call_end
