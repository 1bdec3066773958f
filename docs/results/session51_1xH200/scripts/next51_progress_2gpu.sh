# For a session with 2 GPUs: run(kind nvidia-h100-x2 or nvidia-h200-x2, carry [".deps", ".ab"]), ~330 s. NOT yet run.
# Tree: scripts/ab_trees.sh pr=exp/proxy-progress-rounds (FERRY_PROXY_PROGRESS_ROUNDS, NOTE [Proxy progress rounds]:
# the proxy calls UCX's progress up to N times a loop while each call reports work; 1, the default, is main's
# behaviour). Session 51 c6 on ONE GPU: UCX's cuda_ipc checks 16 copy events a progress call, the proxy saw its 64K
# puts complete 12-15 ms late, and with UCX_CUDA_IPC_MAX_POLL=256 it saw them in 0.3 ms and ran ~10-13% faster.
# Here, one virtual node per GPU over cuda_ipc (windows in GPU memory): issue 24's put row (ferry-bench net against
# ucx_perftest, 3 rounds of rounds 1 / 16 / MAX_POLL 256), then the EP over cuda_ipc, rounds 1 against 16 and
# MAX_POLL 256 (3 rounds, --check), and the EP tests over cuda_ipc with rounds 16. Land the knob's new default only
# if the put row and no EP case gets slower.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/common.sh; source scripts/device_call.sh; ferry_export_env; ferry_setup > /dev/null || exit 1
call_begin next51 ${NEXT51_BUDGET:-330}
call_build_trees "ferry-bench ferry_gpu_tests" pr
B=$ROOT/.ab/pr/build
M=${M:-mpirun --allow-run-as-root --bind-to none}
call_virtual_nodes
for r in 1 2 3; do
  for cfg in "r1:" "r16:-x FERRY_PROXY_PROGRESS_ROUNDS=16" "poll256:-x UCX_CUDA_IPC_MAX_POLL=256"; do
    name=${cfg%%:*} extra=${cfg#*:}
    # shellcheck disable=SC2086  # $extra: several words on purpose
    call_run net_${name}_$r 40 $M2 $IPC $extra $B/bench/ferry-bench net --memory cuda --sizes 64K,256K,1M,4M \
      --bytes 256M
  done
done
for f in $CALL_DIR/net_*.log; do echo "== $(basename $f .log)"; grep -E "^cuda" $f; done
call_sweep ipc_ 3 $B/bench/ferry-bench "$IPC" "ep --aligned --check --no-nccl --iters 20 --warmup 3" \
  r16=$B/bench/ferry-bench@"-x FERRY_PROXY_PROGRESS_ROUNDS=16" \
  poll256=$B/bench/ferry-bench@"-x UCX_CUDA_IPC_MAX_POLL=256"
grep -h "check:" $CALL_DIR/ab/*.log | sort | uniq -c
call_run ep_ipc_r16 120 $M2 $IPC -x FERRY_PROXY_PROGRESS_ROUNDS=16 $B/tests/ferry_gpu_tests --gtest_filter='Ep*'
call_end
