# Session 24, call 3 (nvidia-h100-x2): the one-role combine with its kernels loaded at build (one, b606a77) and
# with the own partial reduced inside the home sum (fused, 3c676fb), against main (base, 95c3f8a).
# Before (here): scripts/ab_trees.sh base=95c3f8a one=b606a77 fused=3c676fb
# run(kind nvidia-h100-x2, carry [".deps", ".ab"]): bash docs/results/session24_2xH100/scripts/c3.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 540
call_build_trees ferry-bench base one fused+ferry_gpu_tests
B=.ab/base/build/bench/ferry-bench; O=.ab/one/build/bench/ferry-bench; F=.ab/fused/build/bench/ferry-bench
T=.ab/fused/build/tests/ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_run restricted_np2 60 $M -np 2 $T --gtest_filter='EpRestrictedSms*'
call_run ep_np2 100 $M -np 2 $T --gtest_filter='Ep*'
call_run ep_np4_shared 50 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep.CombineOneRole*:Ep/EpMatrix.*ht*'
for tool in memcheck racecheck; do
  call_run san_$tool 50 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter='Ep.CombineOneRole*'
done
call_run check_fused 40 $M -np 2 $F ep --mode ht --layout expanded --dispatch-types bf16 --sms 24 --check --csv ''
grep -a -E "^ht |check" $CALL_DIR/check_fused.log | head -6
call_ab fused_ 3 $B $F "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 8,24,48
call_ab one_fused_ 3 $O $F "" ep --mode ht --layout expanded --dispatch-types bf16 --sms 24
V="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
call_ab net_ 4 $B $F "$V -x NCCL_P2P_DISABLE=1" ep --mode ht --layout expanded --dispatch-types bf16
call_end
