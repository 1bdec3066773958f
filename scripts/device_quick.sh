#!/usr/bin/env bash
# A short GPU iteration (scripts/device_run.sh is the full run): setup, configure
# and build only TARGETS into build-device, then run each COMMAND (bash) with
# OpenMPI/NCCL's environment, $B the build dir and $M "mpirun ... -np 2", each
# logged to $OUT/quick_<i>.log with its tail printed.
#
#   scripts/device_quick.sh "ferry-bench ferry_gpu_tests" 'CMD1' 'CMD2' ...
#
# FERRY_QUICK_TAR=1: everything under $OUT (logs, CSVs, what the commands wrote
# there) is packed into $OUT/quick_all.tgz at the end, the rest removed: the
# device tool returns only a few files per call.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
OUT="${OUT:-./out}"
mkdir -p "$OUT"
ferry_export_env
ferry_setup >"$OUT/quick_setup.log" 2>&1 || { tail -20 "$OUT/quick_setup.log"; exit 1; }
export B="${BUILD_DIR:-build-device}"
ferry_device_cmake_args "$B"
ferry_nccl_library_path
targets="$1"; shift
t0=$(date +%s)
if ! { cmake "${cmake_args[@]}" && cmake --build "$B" --parallel "$(nproc)" --target $targets; } >"$OUT/quick_build.log" 2>&1; then
  grep -E "error|Error" "$OUT/quick_build.log" | head -30; exit 1
fi
echo "built $targets in $(( $(date +%s) - t0 )) s"
export M="mpirun --allow-run-as-root --bind-to none -np 2"
i=0; rc=0
for cmd in "$@"; do
  i=$((i + 1)); t0=$(date +%s)
  bash -c "$cmd" >"$OUT/quick_$i.log" 2>&1; r=$?
  [ $r -ne 0 ] && rc=$r
  echo "=== [$i] rc=$r $(( $(date +%s) - t0 )) s: $cmd"
  tail -n "${FERRY_QUICK_TAIL:-25}" "$OUT/quick_$i.log"
done
if [ "${FERRY_QUICK_TAR:-0}" = 1 ]; then
  packed="$(mktemp /tmp/quick_all.XXXXXX)"
  (cd "$OUT" && tar czf "$packed" . && find . -mindepth 1 -delete && mv "$packed" quick_all.tgz) &&
    echo "packed $OUT/quick_all.tgz"
fi
exit $rc
