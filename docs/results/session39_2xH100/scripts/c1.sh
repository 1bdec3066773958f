# Session 39 c1 (prepared in session 38 as next_own_slice.sh). run(kind nvidia-h100-x2, carry [".deps", ".ab"]), ~400 s.
#   base = main; new = exp/own-slice-chunk 9c5a5e0 (+ a comment rewrap): the receive's own-partial slice holds
#   the whole chunk up to 2048 columns (own_slice_units), so at T > 128 (2048-column chunks) no own reduction
#   follows the wait; session 38's slice held 1024 columns, and T=256 moved least there (0.971; T=512 0.877).
#   ptxas: the receive kernel 64 / 156 bytes of spills against main's 44 / 88; 128 KB of dynamic shared memory
#   per receive block at 2048 columns (32 KB at 1024).
# Before (here): scripts/ab_trees.sh base=main new=exp/own-slice-chunk
# Merge only if no case is slower (T=1 / 128 must read 1.00: their chunks fit the old slice).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 540
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_base_new ferry_gpu_tests  # sets M, T, B, N, SAN
call_ep_checks $T  # Ep*, 3 / 8 shared ranks, memcheck / racecheck / synccheck
call_run shared_np4 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T \
  --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.IndexTypesAndApis*:Ep.TokensWithoutExperts:Ep.SkewAll*'
grep -aq "FAILED  \]" $CALL_DIR/ep_tests.log && { echo "tests failed: no A/B"; call_end; exit 0; }
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
# Knobs on new, same binary (session 38's c5 trace: the peer partials' chain is the critical path at T=128):
# fewer receive blocks (more send SMs), and 512-column chunks at T=128 (more, shorter peer items; this also changes
# the dispatch: read the combine rows).
for knob in FERRY_EP_COMBINE_RECV_BLOCKS=44 FERRY_EP_COMBINE_RECV_BLOCKS=33 FERRY_EP_CHUNK_COLS=512; do
  tag=$(echo "$knob" | tr -dc '0-9')
  printf '#!/bin/bash\n%s exec %s "$@"\n' "$knob" "$N" > /tmp/knob$tag.sh && chmod +x /tmp/knob$tag.sh
  call_ab k${tag}_ 2 $N /tmp/knob$tag.sh "" ep --mode ll --tokens 128,256,512
done
call_end
