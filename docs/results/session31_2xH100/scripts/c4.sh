# Session 31, call 4 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])). Issue 23, low-latency combine (T=128 24.6 us
# against <= 22): branch exp/ll-own-at-home (NOTE [EP combine own partial at home], combine.cu): combine()'s
# receive warp reduces this rank's own partial itself (first in the sum, the same bits), the send half does the
# peer's items only. Before (here): rm -rf .ab; for t in base:main new:exp/ll-own-at-home; do d=.ab/${t%%:*};
#   mkdir -p $d; git archive ${t#*:} | tar -x -C $d; rm -rf $d/docs; done
# A/B base against new first (low latency, 4 rounds, NCCL beside), then the tests on the new tree (Ep* on 2 GPUs with
# the new Ep.CombineOwnPartialAtHomeAgrees, the three sanitizers, --check), then 3 low-latency runs of the new tree
# (issue 23's low-latency rows, --route-ahead) and the knob's own A/B in one binary.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 570
call_build_trees ferry-bench base new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"; T=.ab/new/build/tests/ferry_gpu_tests
B=$ROOT/.ab/base/build/bench/ferry-bench; N=$ROOT/.ab/new/build/bench/ferry-bench
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
call_ab ll_ 4 $B $N "" ep --mode ll --tokens 1,128,512
call_run ep_np2 150 $M -np 2 $T --gtest_filter='Ep*'
grep -a -E "CombineOwnPartialAtHome|StagedAndDirect|FAILED" $CALL_DIR/ep_np2.log | head -8
SF='Ep.CombineOwnPartialAtHomeAgrees:Ep/EpMatrix.*ll_bf16*:Ep.LowLatencyGraphReplayWithNewRouting'
for tool in memcheck racecheck synccheck; do
  call_run $tool 90 $M -np 2 $SAN --tool $tool --error-exitcode 86 $T --gtest_filter="$SF"
done
call_run check 40 $M -np 2 $N ep --mode ll --tokens 1,128,512 --check --csv ''
grep -a -E "^ll |check" $CALL_DIR/check.log | head -12
for i in 1 2 3; do
  call_run ep_ll_$i 40 $M -np 2 $N ep --mode ll --tokens 1,128,512 --route-ahead --csv $CALL_DIR/ep_ll_$i.csv
done
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$3" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w off "FERRY_EP_COMBINE_OWN_AT_HOME=0" $N; w on "FERRY_EP_COMBINE_OWN_AT_HOME=1" $N
[ "$(call_left)" -gt 90 ] && call_ab knob_ 2 $CALL_DIR/off $CALL_DIR/on "" ep --mode ll --tokens 128,512
rm -f $CALL_DIR/off $CALL_DIR/on
call_end
