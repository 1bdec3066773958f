#!/usr/bin/env bash
# DeepEP v1 beside ferry, on the GPU machine (issue 23's peer): builds DeepEP from
# .deps/DeepEP (a source export of deepseek-ai/DeepEP at 567632d, made here with
#   git --git-dir=<mirror> archive 567632d | tar -x -C .deps/DeepEP
# and carried with .deps; the device has no network) and runs its intranode and
# low-latency tests on the local GPUs at ferry-bench ep's reference shape, then
# prints DeepEP's own best-tuning lines. Build: FACTS.md's recipe (about 75 s;
# NVSHMEM comes from the torch venv).
#
#   OUT=/path/out scripts/device_deepep.sh        (FERRY_DEEPEP_NP: processes, default: the GPU count)
#
# Logs: $OUT/deepep_build.log, deepep_intranode.log, deepep_low_latency.log.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-./out}"; mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
SRC="$ROOT/.deps/DeepEP"
[ -f "$SRC/setup.py" ] || { echo "device_deepep: no $SRC (export DeepEP 567632d there and carry .deps)"; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NP="${FERRY_DEEPEP_NP:-$(nvidia-smi -L 2>/dev/null | wc -l)}"
[ "$NP" -ge 2 ] || { echo "device_deepep: SKIPPED: needs 2 GPUs ($NP visible)"; exit 0; }
BUILD="$OUT/deepep_src"   # build in a copy: the carried tree stays clean
rm -rf "$BUILD"; cp -r "$SRC" "$BUILD"
t0=$(date +%s)
if ! (cd "$BUILD" && CPATH=/usr/local/cuda/include/cccl TORCH_CUDA_ARCH_LIST=9.0 \
      python3 setup.py build_ext --inplace) >"$OUT/deepep_build.log" 2>&1; then
  echo "device_deepep: build failed"; tail -20 "$OUT/deepep_build.log"; rm -rf "$BUILD"; exit 1
fi
echo "device_deepep: built in $(( $(date +%s) - t0 )) s"
rc=0
(cd "$BUILD" && PYTHONPATH="$BUILD${PYTHONPATH:+:$PYTHONPATH}" timeout "${FERRY_DEEPEP_TIMEOUT:-300}" python3 tests/test_intranode.py --num-processes "$NP" \
   --num-tokens 4096 --hidden 7168 --num-topk 8 --num-experts 256) >"$OUT/deepep_intranode.log" 2>&1 || rc=1
(cd "$BUILD" && PYTHONPATH="$BUILD${PYTHONPATH:+:$PYTHONPATH}" timeout "${FERRY_DEEPEP_TIMEOUT:-300}" python3 tests/test_low_latency.py --num-processes "$NP" \
   --num-tokens 128 --hidden 7168 --num-topk 8 --num-experts 256) >"$OUT/deepep_low_latency.log" 2>&1 || rc=1
echo "== DeepEP 567632d, $NP processes (intranode: T=4096 H=7168 top-8/256; low latency: T=128)"
grep -h "\[tuning\] Best\|\[layout\]" "$OUT/deepep_intranode.log" | head -20
grep -hiE "bandwidth|avg_t|us" "$OUT/deepep_low_latency.log" | grep -v "^\[config\]" | head -20
rm -rf "$BUILD"
exit $rc
