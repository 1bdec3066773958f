# shellcheck shell=bash
# Helpers for the driver script of one device call (docs/results/<session>/scripts/*.sh): a budget
# for the call's stages, one log per stage with its pass/fail counts, base/new A/Bs, and one tarball
# at the end (the device tool brings back few files). Sourced after common.sh:
#
#   source scripts/common.sh; source scripts/device_call.sh
#   call_begin NAME SECONDS        logs in $OUT/NAME; stages start only while SECONDS are left
#   call_run STAGE TIMEOUT CMD...  runs CMD with its output in STAGE.log, prints rc, time and counts
#   call_ab TAG ROUNDS BASE NEW "MPIRUN ARGS" BENCH ARGS...
#                                  mpirun MPIRUN ARGS -np ${CALL_NP:-2} {BASE,NEW} BENCH ARGS --csv ..., alternating
#                                  (BASE, NEW: ferry-bench paths), then scripts/ab_compare.py's table
#   call_sweep TAG ROUNDS BASE "MPIRUN ARGS" "BENCH ARGS" NAME=BENCH[@"EXTRA MPIRUN ARGS"]...
#                                  BASE, then each NAME's BENCH (with its extra mpirun arguments, e.g. a knob's
#                                  -x; a round starts one NAME further on), for ROUNDS rounds; then
#                                  scripts/ab_compare.py's table of each NAME against BASE (ab/table_TAGNAME.txt);
#                                  no NAME may be another's followed by _
#   call_build_trees "TARGETS" TREE[+EXTRA,...]...
#                                  configures and builds TARGETS (and a tree's EXTRA targets) in each
#                                  .ab/TREE (made here by scripts/ab_trees.sh: a git archive of one revision,
#                                  patches applied; .deps linked in) at once, then
#                                  prints the build time; e.g. call_build_trees ferry-bench base new+ferry_gpu_tests
#   call_base_new [EXTRA]          the usual two-tree call: call_build_trees ferry-bench base new[+EXTRA], then
#                                  sets M (mpirun), T (new's GPU tests), B / N (base's / new's ferry-bench) and
#                                  SAN (compute-sanitizer) for the driver's stages
#   call_build_dir DIR "TARGETS"   configures DIR (a Release build of the working tree; FERRY_EP_TRACE=1: with
#                                  the EP trace) and builds TARGETS there, then prints the build time
#   call_ep_checks TESTS           the EP GPU checks a low-latency kernel change lands with (sessions 35-37):
#                                  TESTS (a ferry_gpu_tests path) Ep* on 2 ranks, the low-latency matrix on 3 and
#                                  8 ranks sharing the GPUs, memcheck / racecheck / synccheck on the staged tests
#   call_virtual_nodes             sets the mpirun arguments of one virtual node per rank (VN) and of each transport
#                                  between them (SM: UCX shared memory, TCP, IPC: cuda_ipc with GPU-memory windows;
#                                  NCCL kept on the same transport where it runs beside), and M2 ($M -np 2)
#   call_mps_start                 where the ranks must share GPUs (fewer GPUs than MIN_GPUS, default 2): starts the
#                                  CUDA MPS daemon (so their kernels run at once), exports its directories and adds
#                                  them to M (mpirun, set if unset); sets CALL_MPS=1 (else 0). call_mps_stop ends it.
#   call_end                       packs $OUT/NAME into NAME.tgz (the only file left there)
#
# The same method as scripts/ab_bench.sh (base and new alternating on one machine, medians); this
# file only keeps the stages of a call inside its time. CALL_MPIRUN overrides the mpirun command.

call_begin() {
  CALL_NAME="$1"
  CALL_BUDGET="$2"
  CALL_DIR="$OUT/$CALL_NAME"
  CALL_T0=$SECONDS
  mkdir -p "$CALL_DIR"
}

call_elapsed() { echo $((SECONDS - CALL_T0)); }
call_left() { echo $((CALL_BUDGET - (SECONDS - CALL_T0))); }

call_run() {
  local stage="$1" limit="$2"
  shift 2
  if [ "$(call_left)" -lt 15 ]; then
    echo "$stage skipped (time)"
    return 0
  fi
  [ "$limit" -gt "$(call_left)" ] && limit="$(call_left)"
  timeout "$limit" "$@" >"$CALL_DIR/$stage.log" 2>&1
  local rc=$?
  local counts
  counts="$(grep -aE 'FAILED  \]|PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests passed' "$CALL_DIR/$stage.log" |
    sed 's/\x1b\[[0-9;]*m//g' | sort | uniq -c | head -4 | sed 's/^ *//' | tr '\n' ';')"
  echo "$stage rc=$rc ($(call_elapsed) s) $counts"
  return 0
}

call_ab() {
  local tag="$1" rounds="$2" base="$3" new="$4" mpi_args="$5"
  shift 5
  local dir="$CALL_DIR/ab" r side bench
  mkdir -p "$dir"
  # shellcheck disable=SC2206
  local mpirun=(${CALL_MPIRUN:-mpirun --allow-run-as-root --bind-to none})
  # shellcheck disable=SC2206
  local extra=($mpi_args)
  for r in $(seq 1 "$rounds"); do
    for side in base new; do
      bench="$base"
      [ "$side" = new ] && bench="$new"
      if [ "$(call_left)" -lt 30 ]; then
        echo "ab $tag: round $r $side skipped (time)"
        break 2
      fi
      timeout 120 "${mpirun[@]}" -np "${CALL_NP:-2}" "${extra[@]}" "$bench" "$@" --csv "$dir/ab_${tag}${side}_$r.csv" \
        >"$dir/${tag}${side}_$r.log" 2>&1 || echo "ab $tag: round $r $side failed"
    done
  done
  python3 "$ROOT/scripts/ab_compare.py" "$dir" "$tag" 2>&1 | grep -E "^(ferry|nccl)" | tee "$dir/table_$tag.txt"
  echo "ab $tag done ($(call_elapsed) s)"
}

call_sweep() {
  local tag="$1" rounds="$2" base="$3" mpi_args="$4" bench_args="$5"
  shift 5
  local dir="$CALL_DIR/ab" r spec name bench extra
  mkdir -p "$dir"
  # shellcheck disable=SC2206
  local mpirun=(${CALL_MPIRUN:-${M:-mpirun --allow-run-as-root --bind-to none}})
  for r in $(seq 1 "$rounds"); do
    if [ "$(call_left)" -lt 40 ]; then
      echo "sweep $tag: round $r skipped (time)"
      break
    fi
    # shellcheck disable=SC2086  # $mpi_args, $bench_args, $extra: several words on purpose
    timeout 120 "${mpirun[@]}" -np "${CALL_NP:-2}" $mpi_args "$base" $bench_args --csv "$dir/${tag}base_$r.csv" \
      >"$dir/${tag}base_$r.log" 2>&1 || echo "sweep $tag: round $r base failed"
    # Each round starts one config further on, so no config always runs last after the base.
    local -a specs=("${@:$(((r - 1) % $# + 1))}" "${@:1:$(((r - 1) % $#))}")
    for spec in "${specs[@]}"; do
      name="${spec%%=*}" bench="${spec#*=}" extra=""
      [ "$bench" != "${bench%%@*}" ] && extra="${bench#*@}" && bench="${bench%%@*}"
      # shellcheck disable=SC2086
      timeout 120 "${mpirun[@]}" -np "${CALL_NP:-2}" $mpi_args $extra "$bench" $bench_args \
        --csv "$dir/ab_${tag}${name}_new_$r.csv" >"$dir/${tag}${name}_$r.log" 2>&1 ||
        echo "sweep $tag: round $r $name failed"
      [ -f "$dir/${tag}base_$r.csv" ] && cp "$dir/${tag}base_$r.csv" "$dir/ab_${tag}${name}_base_$r.csv"
    done
    echo "sweep $tag: round $r done ($(call_elapsed) s)"
  done
  for spec in "$@"; do
    name="${spec%%=*}"
    echo "== base / $name"
    python3 "$ROOT/scripts/ab_compare.py" "$dir" "${tag}${name}_" 2>&1 | grep -E "^(ferry|nccl)" |
      tee "$dir/table_${tag}${name}.txt"
  done
}

call_build_trees() {
  local targets="$1" tree pid failed=0
  shift
  local -a pids=()
  local spec extra
  # cmake_args: set by ferry_device_cmake_args (common.sh); $targets, $extra: several words on purpose.
  # shellcheck disable=SC2086,SC2154
  for spec in "$@"; do
    tree="${spec%%+*}"
    extra=""
    [ "$tree" != "$spec" ] && extra="${spec#*+}" && extra="${extra//,/ }"
    ln -sfn "$ROOT/.deps" ".ab/$tree/.deps"
    (cd ".ab/$tree" && ferry_device_cmake_args build -DFERRY_BUILD_PYTHON=OFF &&
      cmake "${cmake_args[@]}" >"$CALL_DIR/cfg_$tree.log" 2>&1 &&
      cmake --build build -j$(($(nproc) / $# + 1)) --target $targets $extra >"$CALL_DIR/build_$tree.log" 2>&1) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ "$failed" = 1 ]; then  # the logs stay in the tarball
    echo "a build failed:"
    grep -h " error" "$CALL_DIR"/build_*.log | head
  else
    rm -f "$CALL_DIR"/cfg_*.log "$CALL_DIR"/build_*.log
  fi
  echo "built in $(call_elapsed) s"
}

call_base_new() {
  call_build_trees ferry-bench base "new${1:++$1}"
  # M, T, B, N, SAN: read by the sourcing driver script.
  # shellcheck disable=SC2034
  M="${CALL_MPIRUN:-mpirun --allow-run-as-root --bind-to none}"
  # shellcheck disable=SC2034
  T=.ab/new/build/tests/ferry_gpu_tests
  # shellcheck disable=SC2034
  B="$ROOT/.ab/base/build/bench/ferry-bench"
  # shellcheck disable=SC2034
  N="$ROOT/.ab/new/build/bench/ferry-bench"
  # shellcheck disable=SC2034
  SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
}

call_virtual_nodes() {
  # shellcheck disable=SC2034  # read by the sourcing driver script
  {
    M2="${M:-mpirun --allow-run-as-root --bind-to none} -np 2"
    VN="-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1"
    SM="$VN -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1"
    TCP="$VN -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
    IPC="$VN -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0"
  }
}

call_build_dir() {
  local dir="$1" targets="$2"
  ferry_device_cmake_args "$dir"
  ferry_nccl_library_path
  # cmake_args: set by ferry_device_cmake_args (common.sh); $targets: several words on purpose.
  # shellcheck disable=SC2086,SC2154
  if ! { cmake "${cmake_args[@]}" >"$CALL_DIR/cfg_$(basename "$dir").log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target $targets >"$CALL_DIR/build_$(basename "$dir").log" 2>&1; }; then
    echo "the build of $dir failed:"
    grep -h -E " error|Error" "$CALL_DIR"/cfg_"$(basename "$dir")".log "$CALL_DIR"/build_"$(basename "$dir")".log | head
  else
    rm -f "$CALL_DIR/cfg_$(basename "$dir").log" "$CALL_DIR/build_$(basename "$dir").log"
  fi
  echo "built in $(call_elapsed) s"
}

call_ep_checks() {
  local tests="$1" n tool
  # shellcheck disable=SC2206
  local mpirun=(${CALL_MPIRUN:-mpirun --allow-run-as-root --bind-to none})
  local san
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  call_run ep_tests 100 "${mpirun[@]}" -np 2 "$tests" --gtest_filter='Ep*'
  grep -a "FAILED\|Failure\|Expected\|Which is\|timed out" "$CALL_DIR/ep_tests.log" | head -12
  for n in 3 8; do
    call_run "shared_np$n" 60 "${mpirun[@]}" -np "$n" -x FERRY_TEST_SHARE_GPUS=1 "$tests" \
      --gtest_filter='Ep/EpMatrix.*ll*:Ep.ZeroTokenRanks:Ep.BadExpert*:Ep.Staged*'
  done
  call_run memcheck 40 "${mpirun[@]}" -np 2 "$san" --tool memcheck --error-exitcode 86 "$tests" \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.HandleReuse:Ep.BadExpertIdOnOneRank'
  # racecheck runs Ep.StagedLowLatencyOnFewSms ~34-40 s by itself (session 42 c2 ran out of a 40 s limit)
  call_run racecheck 100 "${mpirun[@]}" -np 2 "$san" --tool racecheck --error-exitcode 86 "$tests" \
    --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
  for tool in synccheck; do
    call_run "$tool" 40 "${mpirun[@]}" -np 2 "$san" --tool "$tool" --error-exitcode 86 "$tests" \
      --gtest_filter='Ep.StagedLowLatencyOnFewSms:Ep.LowLatencyGraphReplayWithNewRouting'
  done
}

call_mps_start() {
  local min_gpus="${1:-2}"
  M="${M:-mpirun --allow-run-as-root --bind-to none}"
  CALL_MPS=0
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge "$min_gpus" ]; then
    return 0
  fi
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && echo "MPS started"
  M="$M -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
  # shellcheck disable=SC2034  # read by the sourcing driver script
  CALL_MPS=1
}

call_mps_stop() {
  if [ "${CALL_MPS:-0}" = 1 ]; then echo quit | nvidia-cuda-mps-control; fi
}

call_end() {
  echo "total $(call_elapsed) s"
  local tarball="/tmp/$CALL_NAME.$$.tgz"
  (cd "$CALL_DIR" && tar czf "$tarball" . && find . -mindepth 1 -delete && mv "$tarball" "$CALL_NAME.tgz")
}
