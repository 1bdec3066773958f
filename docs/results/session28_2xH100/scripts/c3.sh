# Session 28, c3: session 27's next_ll_one_role.sh as run (on exp/ll-one-role-min 1ed4bef).
# Prepared in session 27 for the next session (NOT run). run(kind nvidia-h100-x2, carry [".deps"]), ~260 s, on
# branch exp/ll-one-role-min (git checkout exp/ll-one-role-min first; this script is on main). Host only: low-latency
# buffers of at least FERRY_EP_LL_COMBINE_ONE_ROLE_MIN_TOKENS tokens per rank combine in one role (NOTE [EP combine
# one role]); session 25's c7 measured one role in every low-latency combine: T=128 1.190 (slower), T=512 0.973.
# Here: the suites with it on for every buffer (1), then one binary, 0 against 1, at T=128..1024, to place the
# threshold.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next_ll_one_role 500
call_build_dir build-device "ferry-bench ferry_gpu_tests"
M="mpirun --allow-run-as-root --bind-to none"; T=build-device/tests/ferry_gpu_tests
call_run ep_np2_ll1 150 $M -np 2 -x FERRY_EP_LL_COMBINE_ONE_ROLE_MIN_TOKENS=1 $T --gtest_filter='Ep*'
for n in 3 4; do
  call_run shared_np${n}_ll1 90 $M -np $n -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_EP_LL_COMBINE_ONE_ROLE_MIN_TOKENS=1 $T \
    --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZipfSkew:Ep.ZeroTokenRanks:Ep.CombineOneRole*'
done
for v in 0 1; do
  printf '#!/usr/bin/env bash\nexport FERRY_EP_LL_COMBINE_ONE_ROLE_MIN_TOKENS=%s\nexec %s "$@"\n' $v \
    "$ROOT/build-device/bench/ferry-bench" > $CALL_DIR/m$v
  chmod +x $CALL_DIR/m$v
done
call_ab ll_ 3 $CALL_DIR/m0 $CALL_DIR/m1 "" ep --mode ll --tokens 128,256,512,1024 --dispatch-types bf16
rm -f $CALL_DIR/m0 $CALL_DIR/m1
call_end
