#!/usr/bin/env bash
# A/B of a bench between two source trees on the GPU machine, which has no git:
# the base tree is an export of another commit, e.g.
#   scripts/ab_trees.sh base=REV              (here; carry .ab to the device)
# This script builds ferry-bench from FERRY_AB_BASE (default .ab/base) into
# FERRY_AB_BASE/build, with the same setup as scripts/device_run.sh, then runs
#   mpirun -np FERRY_AB_NP ferry-bench ARGS --csv OUT/ab_{base,new}_ROUND.csv
# FERRY_AB_ROUNDS times (default 3), base and new alternately, where new is
# BUILD_DIR/bench/ferry-bench (default build-device: run scripts/device_run.sh first).
# FERRY_AB_NEW_ARGS (optional) is appended for the new side only, for options the
# base lacks (e.g. "--layout expanded" against a base without rank rows).
# FERRY_AB_TAG (optional) prefixes the CSV names, so several A/Bs share one OUT.
# FERRY_AB_BUILD_NEW=1: also configure and build this tree's ferry-bench (into BUILD_DIR), at the same
# time as the base's, each with half the cores (on the device: about a minute instead of two).
# Compare the CSVs' medians afterwards; both must come from the same machine.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
ferry_export_env
BASE="$(cd "${FERRY_AB_BASE:-.ab/base}" && pwd)" || exit 1
NEW_BUILD="$ROOT/${BUILD_DIR:-build-device}"
NEW="$NEW_BUILD/bench/ferry-bench"
OUT="${OUT:-./out}"; mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
[ -e "$BASE/.deps" ] || ln -s "$ROOT/.deps" "$BASE/.deps"
ferry_setup >/dev/null || exit 1
jobs="$(nproc)"
[ "${FERRY_AB_BUILD_NEW:-0}" = 1 ] && jobs=$(( (jobs + 1) / 2 ))
# build_bench TREE BUILD_DIR LOG_PREFIX: configures TREE into BUILD_DIR and builds ferry-bench.
build_bench() {
  (cd "$1" && ferry_device_cmake_args "$2" &&
     cmake "${cmake_args[@]}" >"$OUT/$3_configure.log" 2>&1 &&
     cmake --build "$2" -j "$jobs" --target ferry-bench >"$OUT/$3_build.log" 2>&1) ||
    { echo "ab_bench: the $3 build failed (logs in $OUT/$3_*.log)"; tail -20 "$OUT/$3_build.log" 2>/dev/null; return 1; }
}
new_pid=""
if [ "${FERRY_AB_BUILD_NEW:-0}" = 1 ]; then
  build_bench "$ROOT" "$NEW_BUILD" ab_new & new_pid=$!
fi
build_bench "$BASE" build ab || exit 1
if [ -n "$new_pid" ]; then wait "$new_pid" || exit 1; fi
[ -x "$NEW" ] || { echo "ab_bench: no $NEW (build it first, or FERRY_AB_BUILD_NEW=1)"; exit 1; }
cd "$ROOT" || exit 1
ferry_device_cmake_args "$NEW_BUILD"
ferry_nccl_library_path  # the bench finds a wheel's NCCL at run time
np="${FERRY_AB_NP:-1}"
for round in $(seq 1 "${FERRY_AB_ROUNDS:-3}"); do
  for side in base new; do
    bin="$NEW"; extra=()
    if [ "$side" = base ]; then bin="$BASE/build/bench/ferry-bench"; else read -r -a extra <<<"${FERRY_AB_NEW_ARGS:-}"; fi
    echo "=== ab round $round: $side"
    mpirun --allow-run-as-root --bind-to none -np "$np" "$bin" "$@" "${extra[@]}" --csv "$OUT/ab_${FERRY_AB_TAG:-}${side}_${round}.csv" ||
      { echo "ab_bench: $side failed"; exit 1; }
  done
done
