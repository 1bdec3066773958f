#!/usr/bin/env bash
# A/B of a bench between two source trees on the GPU machine, which has no git:
# the base tree is an export of another commit, e.g.
#   git archive REV | tar -x -C .ab/base     (here; carry .ab to the device)
# This script builds ferry-bench from FERRY_AB_BASE (default .ab/base) into
# FERRY_AB_BASE/build, with the same setup as scripts/device_run.sh, then runs
#   mpirun -np FERRY_AB_NP ferry-bench ARGS --csv OUT/ab_{base,new}_ROUND.csv
# FERRY_AB_ROUNDS times (default 3), base and new alternately, where new is
# BUILD_DIR/bench/ferry-bench (default build-device: run scripts/device_run.sh first).
# FERRY_AB_NEW_ARGS (optional) is appended for the new side only, for options the
# base lacks (e.g. "--layout expanded" against a base without rank rows).
# FERRY_AB_TAG (optional) prefixes the CSV names, so several A/Bs share one OUT.
# Compare the CSVs' medians afterwards; both must come from the same machine.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
ferry_export_env
BASE="$(cd "${FERRY_AB_BASE:-.ab/base}" && pwd)" || exit 1
NEW="$ROOT/${BUILD_DIR:-build-device}/bench/ferry-bench"
OUT="${OUT:-./out}"; mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
[ -x "$NEW" ] || { echo "ab_bench: no $NEW (build it first)"; exit 1; }
[ -e "$BASE/.deps" ] || ln -s "$ROOT/.deps" "$BASE/.deps"
cd "$BASE" || exit 1
ferry_setup >/dev/null || exit 1
ferry_device_cmake_args build
if ! { cmake "${cmake_args[@]}" >"$OUT/ab_configure.log" 2>&1 &&
       cmake --build build -j "$(nproc)" --target ferry-bench >"$OUT/ab_build.log" 2>&1; }; then
  echo "ab_bench: the base build failed (logs in $OUT/ab_*.log)"; tail -20 "$OUT/ab_build.log" 2>/dev/null; exit 1
fi
ferry_nccl_library_path  # the bench finds a wheel's NCCL at run time
cd "$ROOT" || exit 1
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
