# Session 31, call 3 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])). Issue 23, low latency T=128: branch
# exp/token-prefetch (NOTE [EP token prefetch] in rows.cuh): each direct low-latency send warp prefetches its first
# chunk of input tokens into L1 at kernel start, while block 0 lays out the call and the counts travel; the chunk's
# loads after the wait then hit L1. Before (here): rm -rf .ab; for t in base:main new:exp/token-prefetch; do
#   d=.ab/${t%%:*}; mkdir -p $d; git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
# Tests on the new tree (Ep* on 2 GPUs, memcheck of the low-latency cases, --check), then A/B base against new, NCCL
# beside: low latency 4 rounds at T=1 / 128 / 512, high throughput 2 rounds at 24 SMs (its kernel gained the check).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
call_build_trees ferry-bench base new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
call_run memcheck 90 $M -np 2 $SAN --tool memcheck --error-exitcode 86 $T \
  --gtest_filter='Ep.BadExpertIdOnOneRank:Ep/EpMatrix.*ll_*:Ep.LowLatencyGraphReplayWithNewRouting'
call_run check 60 $M -np 2 $N ep --mode ll --tokens 1,128,512 --check --csv ''
grep -a -E "^ll |check" $CALL_DIR/check.log | head -12
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_end
