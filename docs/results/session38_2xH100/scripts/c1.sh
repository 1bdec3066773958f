# Session 38, call 1. run(kind nvidia-h100-x2, carry [".deps", ".ab"]).
#   base = main 38cd7bd; new = exp/slot-weights 61dc792 (NOTE [EP slot weights]: the dispatch receives write each
#   received token's weights beside slot_rows; the combine loads both at once); rel = exp/own-release-gpu 6c22302
#   (new + NOTE [EP combine own release]: an own token's partial releases its ready word at GPU scope).
#   Trees: scripts/ab_trees.sh base=main new=exp/slot-weights rel=exp/own-release-gpu
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c1 570
{ nvidia-smi -q | grep -iE "bus id|serial number"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench base new+ferry_gpu_tests rel
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/new/build/tests/ferry_gpu_tests
B="$ROOT/.ab/base/build/bench/ferry-bench"; N="$ROOT/.ab/new/build/bench/ferry-bench"
R="$ROOT/.ab/rel/build/bench/ferry-bench"
call_ep_checks $T  # Ep*, 3 / 8 shared ranks, memcheck / racecheck / synccheck
VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
call_run ep_2x1 120 $M -np 2 $VN $T --gtest_filter='Ep*'
call_ab ll_ 3 $B $N "" ep --mode ll --tokens 1,128,256,512
call_ab rel_ 3 $N $R "" ep --mode ll --tokens 1,128,256,512
call_ab ht_ 2 $B $N "" ep --mode ht --sms 24
call_end
