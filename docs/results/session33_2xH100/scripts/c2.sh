# Session 33 c2 (prepared in session 32 as next_staged_l2.sh). run(kind nvidia-h100-x2, carry [".deps"]).
# Why the low-latency combine reads ~1.025 slower after a staged dispatch (NOTE [EP staged low latency],
# FERRY_EP_LL_STAGED=1) with unchanged kernels (sessions 30-31; cause unknown). Hypothesis: L2. The bench times
# (dispatch, combine) back to back over one static expert-output buffer (14.7 MB of rows at T=128 bf16); the staged
# dispatch also writes and reads its staging rows (~3.6 MB more in L2 than the direct one; fp8 half of that, and fp8
# showed no difference), so less of the expert outputs is left in L2 for the combine. A user's combine reads
# outputs a GEMM has just written. --expert-pass (main, ferry-bench ep) rewrites those rows between the two ops as
# a GEMM's epilogue would, timed apart. If the combine's 1.025 goes with it, the staged path's default can be
# decided on the dispatch (0.91-0.96 of the direct path's time in sessions 30-31).
# One build of main; knobs by wrapper scripts (one binary), NCCL beside.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c2 570
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; B=build-device/bench/ferry-bench; T=build-device/tests/ferry_gpu_tests
w() { printf '#!/usr/bin/env bash\nexport %s\nexec %s "$@"\n' "$2" "$ROOT/$B" > $CALL_DIR/$1; chmod +x $CALL_DIR/$1; }
w direct "FERRY_EP_LL_STAGED=0"; w staged "FERRY_EP_LL_STAGED=1"
call_run check_pass 60 $M -np 2 $B ep --mode ht --expert-pass --check --csv ''
call_run check_pass_ll 60 $M -np 2 $B ep --mode ll --tokens 1,128,512 --expert-pass --check --csv ''
call_run check_pass_staged 60 $M -np 2 $CALL_DIR/staged ep --mode ll --tokens 1,128,512 --expert-pass --check --csv ''
call_ab ll_pass_ 3 $CALL_DIR/direct $CALL_DIR/staged "" ep --mode ll --tokens 1,128,512 --expert-pass
call_ab ll_plain_ 3 $CALL_DIR/direct $CALL_DIR/staged "" ep --mode ll --tokens 1,128,512
call_run staged_tests 120 $M -np 2 -x FERRY_EP_LL_STAGED=1 $T --gtest_filter='Ep*'
rm -f $CALL_DIR/direct $CALL_DIR/staged
call_end
