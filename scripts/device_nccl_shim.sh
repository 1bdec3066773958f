#!/usr/bin/env bash
# Issue 25 on one node of 2 GPUs: libferry_nccl.so's GPU tests and figures, in
# about 6 minutes. Builds into build-device (BUILD_DIR) the shim, its GPU test,
# its cost bench and the Python module, and nccl-tests' all_reduce_perf from
# .deps/nccl-tests (source only; exported from NVIDIA/nccl-tests, no network
# needed), then runs, each stage with a time limit and going on after a failure:
#
#   gpu_test      ferry_nccl_shim_gpu_tests, mpirun -np 2, shim on
#   gpu_test_off  the same with FERRY_NCCL_SHIM=off (every call on NCCL)
#   python        tests/python/test_gpu_nccl_shim.py: torch.distributed under
#                 torchrun with and without LD_PRELOAD of the shim (+ latencies)
#   cost          ferry-nccl-shim-cost: shim vs ferry direct vs NCCL, us per call
#   perf_*        all_reduce_perf 8 B..256 MB -g 1, mpirun -np 2, bf16 and float,
#                 with and without LD_PRELOAD (FERRY_NCCL_SHIM_LOG off: timing)
#                 (FERRY_NCCL_SHIM_PERF_ITERS: its iteration options, default "-w 20 -n 200")
#
# Logs and tables under $OUT; a short summary is printed last.
#
#   OUT=/path/out scripts/device_nccl_shim.sh
#
# FERRY_NCCL_SHIM_STAGES: the stages to run (default: all of the above, in order).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
ferry_out_dir || exit 1
ferry_export_env
B="${BUILD_DIR:-build-device}"
STAGES="${FERRY_NCCL_SHIM_STAGES:-gpu_test gpu_test_off python cost perf}"
M=(mpirun --allow-run-as-root --bind-to none -np 2)
T_START=$(date +%s)
SUMMARY=()

say() { echo "== $*"; }
want() { [[ " $STAGES " == *" $1 "* ]]; }
# run_stage NAME SECONDS CMD...: runs CMD with a time limit into $OUT/NAME.log,
# records its status and prints the log's tail.
run_stage() {
  local name="$1" limit="$2" t0 rc
  shift 2
  t0=$(date +%s)
  timeout -k 15 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 124 ] && echo "[timed out after $limit s]" >>"$OUT/$name.log"
  SUMMARY+=("$(printf '%-20s rc=%-3s %4s s' "$name" "$rc" "$(($(date +%s) - t0))")")
  say "$name: rc=$rc ($(($(date +%s) - t0)) s, $OUT/$name.log)"
  tail -n "${FERRY_NCCL_SHIM_TAIL:-12}" "$OUT/$name.log"
  return "$rc"
}

# ---------------------------------------------------------------- configure
ferry_setup >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
ferry_device_cmake_args "$B"
ferry_nccl_library_path
if ! cmake "${cmake_args[@]}" >"$OUT/configure.log" 2>&1; then
  tail -30 "$OUT/configure.log"
  exit 1
fi
cache() { sed -n "s/^$1:[A-Z]*=//p" "$B/CMakeCache.txt" | head -n1; }
NCCL_INC="$(cache FERRY_NCCL_INCLUDE_DIR)"
REAL_NCCL="$(readlink -f "$(cache FERRY_NCCL_LIBRARY)" 2>/dev/null)"
if [ -z "$REAL_NCCL" ] || [ ! -f "$REAL_NCCL" ]; then
  echo "no NCCL library found at configure time (FERRY_NCCL_LIBRARY in $B/CMakeCache.txt)"
  exit 1
fi
# The real NCCL everything here forwards to or links: the one found at configure time
# (setup.sh: the CUDA toolkit's, else the Python wheel's, which torch loads too).
export FERRY_NCCL_LIBRARY="$REAL_NCCL"
LD_LIBRARY_PATH="$(dirname "$REAL_NCCL")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
say "NCCL: $REAL_NCCL (headers $NCCL_INC)"

# ---------------------------------------------------------------- nccl-tests, built beside ferry
NT_SRC="$ROOT/.deps/nccl-tests"
NT="$ROOT/$B/nccl-tests"
NT_PID=""
if want perf; then
  if [ -f "$NT_SRC/src/Makefile" ]; then
    # NCCL_HOME: the headers the shim was built against and the real library as libnccl.so.
    mkdir -p "$NT/nccl-home/lib"
    ln -sfn "$NCCL_INC" "$NT/nccl-home/include"
    ln -sf "$REAL_NCCL" "$NT/nccl-home/lib/libnccl.so"
    mpi_inc="$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')"
    MPI_HOME="${MPI_HOME:-$(dirname "${mpi_inc:-/usr/lib/x86_64-linux-gnu/openmpi/include}")}"
    timeout -k 10 300 make -C "$NT_SRC/src" -j "$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME=/usr/local/cuda \
      NCCL_HOME="$NT/nccl-home" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$NT/build" \
      "$NT/build/all_reduce_perf" >"$OUT/nccl_tests_build.log" 2>&1 &
    NT_PID=$!
  else
    say "no .deps/nccl-tests (carry it): the perf stages are skipped"
  fi
fi

# ---------------------------------------------------------------- ferry targets
targets=(ferry_nccl ferry_nccl_shim_gpu_tests ferry-nccl-shim-cost)
HAVE_PY=0
if grep -q '^FERRY_BUILD_PYTHON:BOOL=ON' "$B/CMakeCache.txt"; then
  targets+=(ferry_python ferry_python_files)
  HAVE_PY=1
fi
run_stage build 420 cmake --build "$B" --parallel "$(nproc)" --target "${targets[@]}" || {
  grep -E "error" "$OUT/build.log" | head -20
}
if [ -n "$NT_PID" ]; then
  wait "$NT_PID"
  rc=$?
  SUMMARY+=("$(printf '%-20s rc=%-3s' nccl_tests_build "$rc")")
  say "nccl-tests build: rc=$rc ($OUT/nccl_tests_build.log)"
  [ "$rc" -ne 0 ] && tail -15 "$OUT/nccl_tests_build.log"
fi

# ---------------------------------------------------------------- tests
GPU_TEST="$B/tests/ferry_nccl_shim_gpu_tests"
if want gpu_test; then run_stage gpu_test 300 "${M[@]}" "$GPU_TEST"; fi
if want gpu_test_off; then run_stage gpu_test_off 300 "${M[@]}" -x FERRY_NCCL_SHIM=off "$GPU_TEST"; fi
if want python; then
  if [ "$HAVE_PY" -eq 1 ]; then
    # The test finds the libnccl torch loads itself and forwards the shim there.
    run_stage python 500 env -u FERRY_NCCL_LIBRARY PYTHONPATH="$ROOT/$B/python" FERRY_NCCL_SHIM_BENCH=1 \
      FERRY_NCCL_SHIM_OUT="$OUT/python_runs" python3 -m pytest -q -rs -s -p no:cacheprovider \
      tests/python/test_gpu_nccl_shim.py
  else
    SUMMARY+=("python         skipped: the build has no Python module (FERRY_BUILD_PYTHON off)")
  fi
fi

# ---------------------------------------------------------------- figures
if want cost; then run_stage cost 180 "${M[@]}" "$B/bench/ferry-nccl-shim-cost"; fi

PERF="$NT/build/all_reduce_perf"
SHIM_LIB="$ROOT/$B/nccl_shim/libferry_nccl.so"
if want perf && [ -x "$PERF" ]; then
  # 200 timed iterations after 20 warm-up ones per size (nccl-tests' default of
  # 20 after 1 left single samples 40% off between runs at 8 KB).
  read -r -a iters <<<"${FERRY_NCCL_SHIM_PERF_ITERS:--w 20 -n 200}"
  for dtype in bfloat16 float; do
    run_stage "perf_${dtype}_nccl" 120 "${M[@]}" "$PERF" -b 8 -e 256M -f 2 -g 1 -d "$dtype" "${iters[@]}"
    run_stage "perf_${dtype}_shim" 120 "${M[@]}" -x LD_PRELOAD="$SHIM_LIB" -x FERRY_NCCL_LIBRARY \
      "$PERF" -b 8 -e 256M -f 2 -g 1 -d "$dtype" "${iters[@]}"
  done
  # One logged run: which calls ferry took (small sizes only, to keep the log short).
  run_stage perf_route_log 60 "${M[@]}" -x LD_PRELOAD="$SHIM_LIB" -x FERRY_NCCL_LIBRARY -x FERRY_NCCL_SHIM_LOG=1 \
    "$PERF" -b 8 -e 1M -f 32 -g 1 -d bfloat16 -n 2 -w 1
elif want perf; then
  SUMMARY+=("perf           skipped: no all_reduce_perf (see $OUT/nccl_tests_build.log)")
fi

# all_reduce_perf's times (us) per size, NCCL vs the shim, out of place and in
# place, and the #wrong counts. Its rows: size count type redop root, then time
# algbw busbw #wrong out of place, the same in place.
perf_compare() {
  local dtype="$1" a="$OUT/perf_${1}_nccl.log" b="$OUT/perf_${1}_shim.log"
  [ -f "$a" ] && [ -f "$b" ] || return
  awk -v dtype="$dtype" '
    FNR == 1 { file++ }
    $1 ~ /^[0-9]+$/ && NF >= 13 && $3 == dtype {
      o[file, $1] = $6; i[file, $1] = $10; w[file, $1] = $9 + $13; if (file == 1) order[++n] = $1
    }
    function x(a, b) { return (b > 0) ? sprintf("%.2f", a / b) : "-" }
    END {
      if (n == 0) exit
      printf "all_reduce_perf %s, us (x = NCCL / shim; wrong = #wrong NCCL/shim)\n", dtype
      printf "%10s | %9s %9s %6s | %9s %9s %6s | %s\n", "bytes", "oop nccl", "oop shim", "x", "ip nccl", "ip shim", "x", "wrong"
      for (k = 1; k <= n; k++) { s = order[k]
        printf "%10s | %9s %9s %6s | %9s %9s %6s | %d/%d\n", s, o[1, s], o[2, s], x(o[1, s], o[2, s]),
               i[1, s], i[2, s], x(i[1, s], i[2, s]), w[1, s], w[2, s] }
    }' "$a" "$b"
}
if want perf; then
  for dtype in bfloat16 float; do perf_compare "$dtype" >"$OUT/perf_${dtype}_compare.txt" 2>/dev/null; done
fi

# ---------------------------------------------------------------- summary
echo
echo "================ summary ($(($(date +%s) - T_START)) s; logs in $OUT)"
printf '%s\n' "${SUMMARY[@]}"
for f in gpu_test gpu_test_off; do
  [ -f "$OUT/$f.log" ] && grep -hE "^\[shim\] (FERRY_NCCL_SHIM=|PASSED|FAILED)|\[  FAILED  \]|^\*\*\* FERRY NCCL SHIM" "$OUT/$f.log" |
    sed "s/^/$f: /" | head -8
done
[ -f "$OUT/python.log" ] && grep -hE "^\[nccl-shim\]|passed|failed|skipped|^bytes|^ *[0-9]+ +[0-9.]+ " "$OUT/python.log" |
  sed 's/^/python: /' | head -14
[ -f "$OUT/cost.log" ] && sed -n '/^   bytes/,$p' "$OUT/cost.log" | sed 's/^/cost: /'
[ -f "$OUT/perf_route_log.log" ] && echo "perf_route_log: ferry $(grep -c -- '-> ferry' "$OUT/perf_route_log.log"), NCCL $(grep -c -- '-> NCCL' "$OUT/perf_route_log.log") ncclAllReduce calls"
for dtype in bfloat16 float; do
  [ -s "$OUT/perf_${dtype}_compare.txt" ] && cat "$OUT/perf_${dtype}_compare.txt"
done
exit 0
