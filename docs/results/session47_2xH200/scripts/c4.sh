# Session 47 c4. run(kind nvidia-h200-x2, carry [".deps", ".ab"]), ~330 s. Trees (scripts/ab_trees.sh ...
# pre=ed2393c new=<main>): what c2 left open of NOTE [EP across nodes: aligned records] (on main since 414b357):
# Ep* as 2x1 over cuda_ipc, the tcp A/B in 3 rounds (c2's 1 round read combine 1.048), and issue 24's rows on the
# new main (ep --aligned over sm with NCCL on shared memory beside, over cuda_ipc; tcp with NCCL's sockets).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin c4 330
{ nvidia-smi -q | grep -iE "product name|bus id"; } > $CALL_DIR/host.txt 2>&1
call_build_trees ferry-bench pre new+ferry_gpu_tests
M="mpirun --allow-run-as-root --bind-to none"
T=.ab/new/build/tests/ferry_gpu_tests
P="$ROOT/.ab/pre/build/bench/ferry-bench"
N="$ROOT/.ab/new/build/bench/ferry-bench"
call_virtual_nodes
call_run ipc_2x1 90 $M2 $IPC $T --gtest_filter="Ep*"
grep -a "FAILED  \]\|Failure\|Which is\|timed out" $CALL_DIR/*.log | head -12
call_ab tcp_ 3 $P $N "$TCP" ep --mode ht --aligned --iters 20 --warmup 3 --no-nccl
timeout 100 $M2 $SM $N ep --aligned --check --iters 60 --warmup 5 --csv $CALL_DIR/ep_sm.csv > $CALL_DIR/ep_sm.log 2>&1
timeout 60 $M2 $IPC $N ep --aligned --check --iters 60 --warmup 5 --no-nccl --csv $CALL_DIR/ep_ipc.csv \
  > $CALL_DIR/ep_ipc.log 2>&1
timeout 90 $M2 $TCP $N ep --mode ht --aligned --check --iters 20 --warmup 3 --csv $CALL_DIR/ep_tcp.csv \
  > $CALL_DIR/ep_tcp.log 2>&1
grep -h "check:\|^ht\|^ll" $CALL_DIR/ep_*.log
call_end
