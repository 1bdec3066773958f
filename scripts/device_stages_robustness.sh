# shellcheck shell=bash
# The robustness stages of scripts/device_run.sh (issue 15), sourced by it, not
# run: each function runs its stages with device_run.sh's run_stage/skip and its
# state (B, B_ABS, BUILT, GPUS, VIRTUAL, MPS_STARTED, MPIRUN, TO), where
# device_run.sh calls it. Their knobs are listed in device_run.sh's header.

# shellcheck disable=SC2154  # B, BUILT, GPUS, ...: set by device_run.sh
robustness_restricted_stages() {
  local cfg stage n per_node env_args RESTRICTED_CONFIGS
  # EP and AllReduce with the SMs restricted (issue 15). NAME:RANKS:RANKS_PER_NODE
  # entries run the RestrictedSms tests time-sliced (no MPS for that stage: a
  # stand-in compute kernel per rank holds all SMs but 1 or 3, which ranks sharing
  # a GPU under MPS would fight over). With the MPS daemon up, stage mps_pct_np2
  # runs the suite (FERRY_MPS_PCT_FILTER) with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=
  # FERRY_MPS_PCT (25) per rank: each rank's kernels get a quarter of the SMs.
  RESTRICTED_CONFIGS="${FERRY_RESTRICTED_CONFIGS:-restricted_np1:1:0 restricted_np2:2:0 restricted_2x1:2:1}"
  for cfg in $RESTRICTED_CONFIGS; do
    IFS=: read -r stage n per_node <<<"$cfg"
    if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "$stage" "FERRY_SKIP_TESTS=1"; continue; fi
    if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip "$stage" "build failed or no GPU"; continue; fi
    [ "$n" -gt "$GPUS" ] && [ "$VIRTUAL" != 1 ] && { skip "$stage" "$n ranks, $GPUS GPUs"; continue; }
    env_args=(-x FERRY_TEST_SHARE_GPUS=1); [ "$per_node" != 0 ] && env_args+=(-x FERRY_RANKS_PER_NODE="$per_node")
    run_stage "$stage" "${TO[@]}" env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY \
      mpirun --allow-run-as-root --bind-to none -np "$n" "${env_args[@]}" "$B/tests/ferry_gpu_tests" \
      --gtest_filter='*RestrictedSms*'
  done
  if [ "$MPS_STARTED" != 1 ] || [ "${FERRY_MPS_PCT_SKIP:-0}" = 1 ]; then skip mps_pct_np2 "no MPS daemon, or FERRY_MPS_PCT_SKIP=1"
  elif [ "$BUILT" -ne 1 ] || [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip mps_pct_np2 "build failed or FERRY_SKIP_TESTS=1"
  else
    run_stage mps_pct_np2 "${TO[@]}" "${MPIRUN[@]}" -np 2 -x FERRY_TEST_SHARE_GPUS=1 \
      -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="${FERRY_MPS_PCT:-25}" "$B/tests/ferry_gpu_tests" \
      --gtest_filter="${FERRY_MPS_PCT_FILTER:-Ep*:AllReduce*}"
  fi
}

robustness_fault_stages() {
  # Killed peers (issue 15): the test forks its own ranks (TCP bootstrap; mpirun would
  # end the job when one dies), kills one with SIGKILL in the middle of AllReduce and
  # EP calls (one node, virtual nodes) and checks the survivors' errors and clean
  # exits. Time-sliced like the restricted_* stages (without the MPS variables the
  # ranks do not join the daemon): a client killed mid-kernel under MPS is untried.
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip gpu_faults "FERRY_SKIP_TESTS=1"
  elif [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip gpu_faults "build failed or no GPU"
  else
    run_stage gpu_faults "${TO[@]}" env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY \
      "$B/tests/ferry_gpu_fault_tests" --gtest_filter='KilledPeer.*'
  fi
  # The cross-node cases again with windows in GPU memory moved by UCX's cuda_ipc
  # (issue 24: the GPU-memory path, docs/internode.md Part 4); the forked ranks
  # inherit the variables. Two GPUs, so that cuda_ipc stands in for GPUDirect.
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip gpu_faults_cuda_ipc "FERRY_SKIP_TESTS=1"
  elif [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 2 ]; then skip gpu_faults_cuda_ipc "build failed or fewer than 2 GPUs"
  else
    run_stage gpu_faults_cuda_ipc "${TO[@]}" env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY \
      UCX_TLS=sm,cuda_ipc,cuda_copy FERRY_UCX_GPU_MEMORY=on FERRY_UCX_PEER_FAILURE=0 \
      "$B/tests/ferry_gpu_fault_tests" --gtest_filter='KilledPeer.AcrossNodes'
  fi
  # The same from Python (tests/python/test_gpu_killed_peer.py, skipped under torchrun).
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ] || [ "${FERRY_SKIP_PYTHON:-0}" = 1 ]; then skip python_faults "skipped"
  elif [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ] || [ ! -d "$B/python/ferry" ]; then skip python_faults "no module or no GPU"
  else
    run_stage python_faults "${TO[@]}" env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY \
      PYTHONPATH="$B_ABS/python" python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu_killed_peer.py
  fi
}

robustness_soak_stages() {
  local v entry per_node n stage env_args soak_to SOAK_ENV SOAK_NPS
  # The soak (FERRY_SOAK=1): ferry_gpu_soak for each entry of FERRY_SOAK_NPS, N (one
  # node) or NxK (N virtual nodes of K ranks); ranks share GPUs where there are
  # more ranks than GPUs. Its own timeout (FERRY_SOAK_TIMEOUT), not FERRY_STAGE_TIMEOUT.
  SOAK_ENV=()
  for v in FERRY_SOAK_EP_CALLS FERRY_SOAK_AR_CALLS FERRY_SOAK_CHECK_EVERY FERRY_SOAK_WARMUP FERRY_SOAK_AR_MAX_BYTES \
           FERRY_SOAK_DEVICE_SLACK_MB FERRY_SOAK_RSS_SLACK_MB FERRY_SOAK_STEADY_DEVICE_SLACK_MB \
           FERRY_SOAK_STEADY_HEAP_SLACK_MB FERRY_SOAK_STEADY_RSS_SLACK_MB FERRY_TEST_SEED \
           MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_ CUDA_MODULE_LOADING; do
    [ -n "${!v:-}" ] && SOAK_ENV+=(-x "$v")
  done
  SOAK_NPS="${FERRY_SOAK_NPS:-2 4 8}"
  if [ "${FERRY_SOAK:-0}" != 1 ]; then skip soak "set FERRY_SOAK=1"; SOAK_NPS=""; fi
  for entry in $SOAK_NPS; do
    per_node=0
    if [[ "$entry" =~ ^([0-9]+)x([0-9]+)$ ]]; then
      n=$((BASH_REMATCH[1] * BASH_REMATCH[2])) per_node="${BASH_REMATCH[2]}" stage="soak_$entry"
    else
      n="$entry" stage="soak_np$entry"
    fi
    if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip "$stage" "build failed or no GPU"; continue; fi
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 8 ]; then skip "$stage" "not a rank count (1..8)"; continue; fi
    env_args=("${SOAK_ENV[@]}")
    # Virtual nodes number their local ranks from 0 again, so their ranks share GPUs too.
    { [ "$n" -gt "$GPUS" ] || [ "$per_node" != 0 ]; } && env_args+=(-x FERRY_TEST_SHARE_GPUS=1)
    [ "$per_node" != 0 ] && env_args+=(-x FERRY_RANKS_PER_NODE="$per_node")
    soak_to=()
    [ "${#TO[@]}" -gt 0 ] && soak_to=(timeout -k 20 "${FERRY_SOAK_TIMEOUT:-1200}")
    STAGE_TIMEOUT="${FERRY_SOAK_TIMEOUT:-1200}" run_stage "$stage" "${soak_to[@]}" "${MPIRUN[@]}" -np "$n" \
      "${env_args[@]}" "$B/tests/ferry_gpu_soak"
  done
}

robustness_nodes_sanitizer_stages() {
  local cfg stage tls env_args sanitizer XFILTER
  # memcheck across 2 virtual nodes, one per GPU where there are two: the cross-node
  # kernels over mapped peers (sm) and with windows in GPU memory (cuda_ipc).
  XFILTER="${FERRY_SANITIZE_NODES_FILTER:-Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse:All/AllReduceMatrix.*/hierarchical*_bf16}"
  for cfg in memcheck_2x1_sm:sm,self memcheck_2x1_cuda_ipc:sm,cuda_ipc,cuda_copy; do
    stage="${cfg%%:*}"; tls="${cfg#*:}"
    if [ "${FERRY_SANITIZE:-0}" != 1 ]; then skip "$stage" "set FERRY_SANITIZE=1"; continue; fi
    if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "$stage" "FERRY_SKIP_TESTS=1"; continue; fi
    if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip "$stage" "build failed or no GPU"; continue; fi
    env_args=(-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 -x UCX_TLS="$tls" -x FERRY_TIMEOUT_MS=120000)
    if [ "$stage" = memcheck_2x1_cuda_ipc ]; then
      [ "$GPUS" -lt 2 ] && { skip "$stage" "fewer than 2 GPUs"; continue; }
      env_args+=(-x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0)
    fi
    sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    # With cuda_copy loaded, UCX's memory domain probes every host region ucp_mem_map registers with
    # cuPointerGetAttribute (uct_cuda_copy_mem_reg), which answers CUDA_ERROR_INVALID_VALUE for memory
    # CUDA does not know: 2 "errors" per rank, not ferry's, seen in session 12. The cuda_ipc stage leaves
    # API errors out; memory errors in the kernels still fail it. The sm stage (no cuda_copy) keeps them.
    local api=()
    [ "$stage" = memcheck_2x1_cuda_ipc ] && api=(--report-api-errors no)
    run_stage "$stage" "${TO[@]}" "${MPIRUN[@]}" -np 2 "${env_args[@]}" \
      "$sanitizer" --tool memcheck "${api[@]}" --error-exitcode 86 "$B/tests/ferry_gpu_tests" --gtest_filter="$XFILTER"
  done
}
