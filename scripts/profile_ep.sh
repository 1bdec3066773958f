#!/usr/bin/env bash
# Nsight Compute profile of the EP kernels on one GPU (world size 1: every kernel
# runs its whole protocol against itself, so ncu's serialized replay cannot
# deadlock). Prints each kernel's duration, its warp-state breakdown and the
# SASS lines with the most stall samples. Run after scripts/device_run.sh built
# build-device.
#
#   scripts/profile_ep.sh [ll|ht] [more ferry-bench ep arguments]
# Environment: OUT (reports and logs, default ./out), FERRY_PROFILE_TOP (SASS lines, default 12),
# FERRY_PROFILE_KERNELS (kernel name regex, default layout|dispatch|combine), FERRY_PROFILE_SKIP / _COUNT
# (launches skipped / profiled, default 10 / 5), FERRY_NCU_ARGS (more ncu options, e.g. --cache-control none)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
ferry_export_env
MODE="${1:-ll}"
shift || true
OUT="${OUT:-./out}"
mkdir -p "$OUT"
B="${BUILD_DIR:-build-device}/bench/ferry-bench"
REP="$OUT/profile_$MODE"
NCU="${NCU:-ncu}"
command -v "$NCU" >/dev/null || NCU=/usr/local/cuda/bin/ncu

# A few calls after warm-up; one profiled launch of each kernel. FERRY_NCU_ARGS: several words on purpose.
# shellcheck disable=SC2086
timeout 300 mpirun --allow-run-as-root --bind-to none -np 1 "$NCU" -f -o "$REP" \
  -k "regex:${FERRY_PROFILE_KERNELS:-layout|dispatch|combine}" --launch-skip "${FERRY_PROFILE_SKIP:-10}" \
  --launch-count "${FERRY_PROFILE_COUNT:-5}" ${FERRY_NCU_ARGS:-} \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SourceCounters \
  "$B" ep --mode "$MODE" --iters 3 --warmup 1 --graph-iters 1 "$@" >"$REP.log" 2>&1 ||
  { echo "ncu failed:"; tail -20 "$REP.log"; exit 1; }

"$NCU" --import "$REP.ncu-rep" --page details --print-units base 2>/dev/null |
  grep -v -E '^ *-+( -+)*$|^ *Metric Name|Section: (Launch|Occupancy)' | head -"${FERRY_PROFILE_LINES:-220}"

# Top SASS lines by stall samples, per profiled kernel.
"$NCU" --import "$REP.ncu-rep" --page source --print-source sass --csv 2>/dev/null >"$REP.src.csv"
python3 - "$REP.src.csv" "${FERRY_PROFILE_TOP:-12}" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
heads = [i for i, r in enumerate(rows) if any("Warp Stall Sampling (All" in c for c in r)]
for n, h in enumerate(heads):
    cols = rows[h]
    s = next(i for i, c in enumerate(cols) if "Warp Stall Sampling (All" in c)
    src = next((i for i, c in enumerate(cols) if c.strip() == "Source"), 1)
    end = heads[n + 1] if n + 1 < len(heads) else len(rows)
    body = [r for r in rows[h + 1:end] if len(r) > s and r[s].strip().replace(".", "").isdigit()]
    total = sum(float(r[s]) for r in body) or 1
    title = " ".join(rows[h - 1])[:120] if h > 0 else ""
    print(f"--- kernel {n}: {title} ({int(total)} samples)")
    for r in sorted(body, key=lambda r: -float(r[s]))[: int(sys.argv[2])]:
        print(f"{100 * float(r[s]) / total:5.1f}%  {r[src][:110]}")
EOF
