# Session 34, call 4 (session 33's next_refactors.sh, rebased). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~520 s.
# Two duplicate mends whose SASS is not the same, so each needs a same-run A/B before it lands:
#   new   = exp/token-routing-helper-34 (ddd984c on main): load_token_routing / write_token_record (rows.cuh)
#           shared by the staged intranode send and the cross-node pack. Staged send kernels: bf16 3600 -> 3808 SASS instructions,
#           fp8 4208 -> 4216; since session 33 the staged fp8 kernel is the default low-latency fp8 path.
#   other = exp/send-chunk-34 (6eabf4b, then 3c6c77d wait_last_count_words, on main): send_chunk calls
#           write_row_chunk instead of a copy of its body; one dispatch kernel's SASS reordered.
# Before (here): scripts/ab_trees.sh base=main new=exp/token-routing-helper-34 other=exp/send-chunk-34
# Each lands only with no case slower (±1% of noise, NCCL beside).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 560
{ nvidia-smi topo -m; nvidia-smi -q | grep -iE "bus id|serial number" ; grep -m1 "model name" /proc/cpuinfo; } > $CALL_DIR/host.txt 2>&1
call_build_trees "ferry-bench ferry_gpu_tests" base new other
M="mpirun --allow-run-as-root --bind-to none"; B="$ROOT/.ab/base/build/bench/ferry-bench"
N="$ROOT/.ab/new/build/bench/ferry-bench"; O="$ROOT/.ab/other/build/bench/ferry-bench"
SM="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS=sm,self"
for tree in new other; do
  call_run ep_$tree 120 $M -np 2 .ab/$tree/build/tests/ferry_gpu_tests --gtest_filter='Ep*'
done
call_run ep_sm_new 90 $M -np 2 $SM .ab/new/build/tests/ferry_gpu_tests --gtest_filter='Ep*'
call_ab ll_new_ 3 $B $N "" ep --mode ll --tokens 1,128,512
call_ab ll_other_ 3 $B $O "" ep --mode ll --tokens 1,128,512
call_ab ht_other_ 2 $B $O "" ep --mode ht --layout expanded --sms 24 --ht-quantize
call_ab sm_new_ 2 $B $N "$SM" ep --mode ll --tokens 128
call_run pcie 60 $M -np 2 $B pcie --sms 8,24 --csv $CALL_DIR/pcie.csv
call_end
