# Session 33 c3 (prepared in session 32 as next_ht_quantize.sh; base changed to main minus the wide stores, since main moved on). run(kind nvidia-h100-x2, carry [".deps", ".ab"]).
# (1) ferry-bench ep --ht-quantize (main c015ab6) runs for the first time: high-throughput fp8 from bf16 tokens
# quantized in the kernel, rows "fp8q", --check. (2) The same-run A/B of NOTE [EP fp8 wide stores] on the quantizing
# high-throughput kernels, which session 32's c3 could not time: base = 71e3ba3 (before the wide stores) with the
# bench option patched in, new = main. First, the hidden-1152 matrix rows added in session 32 (never run yet).
# Before (here): scripts/ab_trees.sh base=main+docs/results/session33_2xH100/scripts/revert_fp8_wide_stores.patch new=main
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN (scripts/device_call.sh)
# The matrix rows of hidden 1152 (9 scale groups: partial quantizer steps, a 128-column last chunk), new in session 32.
call_run h1152_np2 90 $M -np 2 $T --gtest_filter='*h1152*'
call_run h1152_memcheck 90 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T --gtest_filter='Ep/EpMatrix.*fp8_h1152*'
call_run check_new 90 $M -np 2 $N ep --mode ht --dispatch-types fp8 --ht-quantize --check --csv ''
call_ab htq_ 3 $B $N "" ep --mode ht --sms 8,24,48 --dispatch-types fp8 --ht-quantize --route-ahead
# c1's --check with low latency at T=4096 ran past its 60 s: slow or stuck? (main's build, a longer budget)
call_run ll4096_check 150 $M -np 2 $N ep --mode ll --tokens 4096 --check --csv ''
call_end
