# Session 38, call 3. run(kind nvidia-h100-x2, carry [".deps", ".ab"]).
#   base = main 6508083 (kernels 38cd7bd); cur = exp/own-release-gpu 6c22302 (c1's rel: slot weights + the own
#   partial's release at GPU scope); new = exp/ll-own-at-home d137ca8 (v2) (cur + NOTE [EP combine own partial at home]:
#   in low latency the receive grid reduces this rank's own expert rows itself; the send grid sends peers' partials).
#   Trees: scripts/ab_trees.sh base=main cur=exp/own-release-gpu new=exp/ll-own-at-home
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c3 570
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base cur new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/new/build/tests/ferry_gpu_tests
B="$ROOT/.ab/base/build/bench/ferry-bench"; C="$ROOT/.ab/cur/build/bench/ferry-bench"
N="$ROOT/.ab/new/build/bench/ferry-bench"
call_ep_checks $T  # Ep*, 3 / 8 shared ranks, memcheck / racecheck / synccheck
call_run shared_np4 60 $M -np 4 -x FERRY_TEST_SHARE_GPUS=1 $T --gtest_filter='Ep/EpMatrix.*ll*:Ep.LowLatency*:Ep.IndexTypesAndApis*:Ep.TokensWithoutExperts:Ep.SkewAll*'
grep -aq "FAILED  \]" $CALL_DIR/ep_tests.log && { echo "tests failed: no A/B"; call_end; exit 0; }
call_ab own_ 3 $C $N "" ep --mode ll --tokens 1,128,256,512
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_run figures 40 $M -np 2 $N ep --mode ll --tokens 1,128,256,512 --route-ahead --check --csv $CALL_DIR/figures.csv
call_end
