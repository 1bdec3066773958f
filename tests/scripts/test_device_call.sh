#!/usr/bin/env bash
# CPU test of scripts/device_call.sh (the helpers of a device call's driver script): stage logs and
# counts, the time budget, an A/B with a stand-in bench and mpirun, and the single tarball at the end.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../../scripts/common.sh" || exit 1
source "$ROOT/scripts/device_call.sh" || exit 1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
OUT="$WORK/out"
fails=0
expect() {  # expect WHAT TEXT PATTERN
  if grep -qE "$3" <<<"$2"; then echo "ok: $1"; else echo "FAIL: $1: '$2' lacks /$3/"; fails=$((fails + 1)); fi
}

call_begin c1 100
expect "a passing stage" "$(call_run good 10 bash -c 'echo "[  PASSED  ] 3 tests."')" "^good rc=0 .*PASSED  \] 3 tests"
expect "a failing stage" "$(call_run bad 10 false)" "^bad rc=1 "
expect "a stage past its timeout" "$(call_run slow 1 sleep 5)" "^slow rc=124 "
[ -f "$CALL_DIR/good.log" ] && echo "ok: the stage log" || { echo "FAIL: no good.log"; fails=$((fails + 1)); }

# A stand-in ferry-bench (writes an ep CSV row with the time in FAKE_US) and mpirun (drops -np N).
cat >"$WORK/bench" <<'B'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = --csv ] && csv="$2"; shift; done
printf 'mode,layout,op,tokens,sms,ferry_us,nccl_us\nht,expanded,dispatch bf16,4096,24,%s,200\n' "$FAKE_US" >"$csv"
B
cat >"$WORK/mpirun" <<'M'
#!/usr/bin/env bash
args=(); while [ $# -gt 0 ]; do if [ "$1" = -np ]; then shift 2; continue; fi; args+=("$1"); shift; done
exec env "${args[@]}"
M
chmod +x "$WORK/bench" "$WORK/mpirun"
printf '#!/usr/bin/env bash\nFAKE_US=100 exec %s "$@"\n' "$WORK/bench" >"$WORK/base"
printf '#!/usr/bin/env bash\nFAKE_US=90 exec %s "$@"\n' "$WORK/bench" >"$WORK/new"
chmod +x "$WORK/base" "$WORK/new"
out="$(CALL_MPIRUN="$WORK/mpirun" call_ab t_ 2 "$WORK/base" "$WORK/new" "" ep --mode ht)"
expect "the A/B table" "$out" "ferry +ht expanded +dispatch bf16 .*base +100.00 +new +90.00 +new/base 0.900"
expect "NCCL's rows" "$out" "nccl .*new/base 1.000"
[ "$(ls "$CALL_DIR/ab" | grep -c '^ab_t_')" = 4 ] && echo "ok: 2 rounds of 2 sides" || { echo "FAIL: CSVs"; ls "$CALL_DIR/ab"; fails=$((fails + 1)); }

call_end >/dev/null
left="$(ls "$OUT/c1")"
expect "one tarball left" "$left" "^c1.tgz$"
expect "the tarball holds the logs" "$(tar tzf "$OUT/c1/c1.tgz")" "good.log"

# call_build_trees: every tree configured and built with the common targets, a tree's +EXTRA targets too
# (stand-ins for cmake and ferry_device_cmake_args, run from a folder holding .ab/).
call_begin c3 100
mkdir -p "$WORK/tree/.ab/base" "$WORK/tree/.ab/new" "$WORK/bin"
cat >"$WORK/bin/cmake" <<'C'
#!/usr/bin/env bash
echo "$*" >>"$PWD/cmake.calls"
C
chmod +x "$WORK/bin/cmake"
# shellcheck disable=SC2034  # read by call_build_trees
ferry_device_cmake_args() { cmake_args=(-S . -B "$1" "${@:2}"); }
out="$(cd "$WORK/tree" && PATH="$WORK/bin:$PATH" call_build_trees "ferry-bench" base new+ferry_gpu_tests,ferry_gpu_fault_tests)"
expect "the trees built" "$out" "^built in"
expect "base: the common targets only" "$(grep -- --build "$WORK/tree/.ab/base/cmake.calls")" "target ferry-bench *$"
expect "new: its extra targets too" "$(grep -- --build "$WORK/tree/.ab/new/cmake.calls")" \
  "target ferry-bench ferry_gpu_tests ferry_gpu_fault_tests$"
expect "configured once each" "$(grep -c -- -DFERRY_BUILD_PYTHON=OFF "$WORK/tree/.ab/new/cmake.calls")" "^1$"

# call_base_new: the same two trees (new with its extra targets), then the paths a driver's stages use.
rm -f "$WORK/tree/.ab/base/cmake.calls" "$WORK/tree/.ab/new/cmake.calls"
(cd "$WORK/tree" && PATH="$WORK/bin:$PATH" call_base_new ferry_gpu_tests >/dev/null && echo "$B|$N|$T") >"$WORK/paths"
expect "call_base_new: new's extra target" "$(grep -- --build "$WORK/tree/.ab/new/cmake.calls")" \
  "target ferry-bench ferry_gpu_tests$"
expect "call_base_new: base's bench, new's bench and tests" "$(cat "$WORK/paths")" \
  "/\.ab/base/build/bench/ferry-bench\|.*/\.ab/new/build/bench/ferry-bench\|\.ab/new/build/tests/ferry_gpu_tests$"

call_begin c2 10
expect "no stage once the budget is spent" "$(call_run late 5 true)" "^late skipped \(time\)"

[ "$fails" = 0 ] && echo "device_call: all passed" || { echo "device_call: $fails failed"; exit 1; }
