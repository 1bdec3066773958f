#!/usr/bin/env bash
# Sweeps the EP tuning knobs, one at a time from the defaults, with ferry-bench ep
# on N ranks (one per GPU), and prints one table: mode, knob, value, then the time
# of each case in µs (median of CUDA-graph replays, max over ranks, as ferry-bench
# reports it). It is for retuning the defaults on a machine they were not measured
# on (docs/ep-notes.md, open items). The knobs are read when an EpBuffer is made,
# so each value is its own ferry-bench run. Run after a build (scripts/device_run.sh
# builds build-device).
#
#   scripts/tune_ep.sh [more ferry-bench ep options, e.g. --skew 1]
#
# Environment:
#   FERRY_NP          ranks (default: every GPU)
#   BUILD_DIR         build directory (default build-device)
#   OUT               where the CSVs and the table go (default ./out; files tune_*.csv, tune.txt)
#   FERRY_TUNE_SWEEPS the sweeps, space-separated MODE:KNOB=V1,V2,... (default below)
set -uo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1  # sets ROOT, enters it
ferry_export_env

BENCH="${BUILD_DIR:-build-device}/bench/ferry-bench"
OUT="${OUT:-./out}"
mkdir -p "$OUT" || exit 1
[ -x "$BENCH" ] || { echo "tune_ep: no $BENCH (build first: scripts/device_run.sh)" >&2; exit 1; }
gpus="$(ferry_gpu_count)"
NP="${FERRY_NP:-$gpus}"
if ! [[ "$NP" =~ ^[0-9]+$ ]] || [ "$NP" -lt 1 ] || [ "$NP" -gt "$gpus" ]; then
  echo "tune_ep: FERRY_NP=$NP ranks, but this machine has $gpus GPUs (one rank per GPU)" >&2
  exit 1
fi

# Defaults (src/ep/ep_buffer.cpp): high-throughput on 24 SMs, receive blocks 2/3
# (dispatch) and 1/3 (combine), chunks of 8192 columns (whole 7168-column rows);
# low-latency on every SM (132 on an H200), receive blocks 2/3 and 1/2, chunks of 2048 (1024 on 2 ranks of
# one node up to 128 tokens per rank).
DEFAULT_SWEEPS="ht:FERRY_EP_DISPATCH_RECV_BLOCKS=8,12,16,20 ht:FERRY_EP_COMBINE_RECV_BLOCKS=4,8,12,16
ht:FERRY_EP_CHUNK_COLS=2048,3584 ll:FERRY_EP_DISPATCH_RECV_BLOCKS=44,66,110 ll:FERRY_EP_COMBINE_RECV_BLOCKS=33,99
ll:FERRY_EP_CHUNK_COLS=1024,4096"
read -r -a sweeps <<<"$(echo "${FERRY_TUNE_SWEEPS:-$DEFAULT_SWEEPS}" | tr '\n' ' ')"

TABLE="$OUT/tune.txt"
printf '%-4s %-32s %6s %12s %12s %12s\n' mode knob value "dispatch bf16" "dispatch fp8" "combine bf16" | tee "$TABLE"
failed=0
# run MODE KNOB VALUE: one ferry-bench run with KNOB=VALUE (KNOB "-": the defaults), one table row.
run() {
  local mode="$1" knob="$2" value="$3" csv env_args=()
  csv="$OUT/tune_${mode}_${knob#FERRY_EP_}_${value}.csv"
  [ "$knob" != - ] && env_args=(-x "$knob=$value")
  if ! timeout 300 mpirun --allow-run-as-root --bind-to none -np "$NP" "${env_args[@]}" \
      "$BENCH" ep --mode "$mode" --no-nccl --csv "$csv" "${EXTRA[@]}" >"${csv%.csv}.log" 2>&1; then
    printf '%-4s %-32s %6s  failed (log: %s)\n' "$mode" "$knob" "$value" "${csv%.csv}.log" | tee -a "$TABLE"
    failed=1
    return
  fi
  # The op and ferry_us columns, found by name in the CSV header (their positions moved before);
  # the expanded contract's rows where the CSV has both layouts.
  awk -F, -v mode="$mode" -v knob="$knob" -v value="$value" '
    NR == 1 { for (i = 1; i <= NF; ++i) { if ($i == "op") op = i; if ($i == "ferry_us") us_col = i; if ($i == "layout") lay = i } next }
    !lay || $lay == "expanded" { us[$op] = $us_col }
    END { printf "%-4s %-32s %6s %12s %12s %12s\n", mode, knob, value,
            us["dispatch bf16"], us["dispatch fp8"], us["combine bf16"] }' "$csv" | tee -a "$TABLE"
}
EXTRA=("$@")
for mode in ht ll; do
  run "$mode" - default
  for sweep in "${sweeps[@]}"; do
    [ "${sweep%%:*}" = "$mode" ] || continue
    spec="${sweep#*:}"
    knob="${spec%%=*}"
    IFS=, read -r -a values <<<"${spec#*=}"
    for value in "${values[@]}"; do run "$mode" "$knob" "$value"; done
  done
done
echo "(table: $TABLE)"
exit "$failed"
