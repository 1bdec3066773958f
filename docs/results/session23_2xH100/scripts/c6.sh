# Session 23, call 6 (nvidia-h100-x2, a fresh start; run(carry [".deps", ".ab"])): the coalesced layout kernels
# (branch exp/layout-coalesced, NOTE [EP layout coalesced]) against main, after c5's profile (layout_kernel 8.1 us,
# add_lower_blocks 6.5 us at T=4096, mostly uncoalesced accesses). The send kernels' PTX is identical in both trees
# (the fused layout is unchanged), so low latency (fused) is not re-timed here.
# Before: rm -rf .ab; mkdir -p .ab/base .ab/new; git archive main | tar -x -C .ab/base
#         git archive exp/layout-coalesced | tar -x -C .ab/new
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c6 335
grep -q kStaged .ab/new/src/ep/routing_layout.cuh || { echo "the new tree is not the branch"; call_end; exit 1; }
call_build_trees ferry-bench base new+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; N=.ab/new/build/bench/ferry-bench; T=.ab/new/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
L='Ep.FusedAndSeparateLayoutAgree:Ep.BadExpertIds*:Ep.Route*:EpRankRowsCases.Route*'
call_run ep_np2 50 $M -np 2 $T --gtest_filter='Ep*'
call_run layout_np4_shared 40 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter="$L"
for tool in memcheck racecheck; do
  call_run san_$tool 40 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.BadExpertIdsAcrossLayoutBlocks'
done
call_ab ht_ 2 $B $N "" ep --mode ht --route-ahead --sms 24 --check
call_end
