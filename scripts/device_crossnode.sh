#!/usr/bin/env bash
# Issue 24's figures in one run on a machine of 2 GPUs: 2 virtual nodes, one per
# GPU (FERRY_RANKS_PER_NODE=1), NCCL kept off NVLink in the same processes
# (NCCL_P2P_DISABLE=1; over tcp also NCCL_SHM_DISABLE=1), then a table of
# ferry / NCCL (and cuda_ipc / NVLink) printed last and written to
# $OUT/crossnode_table.txt (scripts/crossnode_table.py).
#
#   OUT=/path/out scripts/device_crossnode.sh        (builds ferry-bench into BUILD_DIR if it is not there)
#
# Stages (each logged to $OUT/<stage>.txt with a CSV beside it; a failing stage
# does not stop the others):
#   ar_sm, ar_tcp     ferry-bench allreduce bf16 256K..64M over UCX shared memory / tcp
#   ep_sm, ep_tcp     ferry-bench ep --layout expanded --aligned --stages --halves (the per-stage split;
#                     --aligned: every op, ferry's and NCCL's, starts on both ranks together, NOTE [EP bench:
#                     aligned ops] in bench/ep_align.hpp)
#   ep_cuda_ipc       the same with windows in GPU memory moved by UCX's cuda_ipc
#                     (FERRY_UCX_GPU_MEMORY=on, docs/internode.md Part 4)
#   ep_nvlink         the same shape inside one node over NVLink: cuda_ipc's reference
#   ar_tcp_pf, ep_tcp_pf  (not in the default list) ar_tcp / ep_tcp with FERRY_UCX_PEER_FAILURE=1: UCX's
#                     peer-failure handling kept on tcp, so UCX emulates the puts (the default, auto, connects
#                     tcp again without it: NOTE [tcp without UCX's peer-failure handling])
# FERRY_CROSSNODE_STAGES: the stages to run (default: all but the _pf ones, in this order).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1
ferry_out_dir || exit 1
ferry_export_env
B="${BUILD_DIR:-build-device}"
BENCH="$B/bench/ferry-bench"
ferry_setup >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
if [ ! -x "$BENCH" ]; then  # build it the way scripts/device_quick.sh does
  ferry_device_cmake_args "$B"
  { cmake "${cmake_args[@]}" && cmake --build "$B" --parallel "$(nproc)" --target ferry-bench; } >"$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -20; exit 1; }
fi
ferry_device_cmake_args "$B"
ferry_nccl_library_path  # the bench finds a wheel's NCCL at run time
STAGES="${FERRY_CROSSNODE_STAGES:-ar_sm ar_tcp ep_sm ep_tcp ep_cuda_ipc ep_nvlink}"
M=(mpirun --allow-run-as-root --bind-to none -np 2)
VNODES=(-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1)
LIMIT="${FERRY_STAGE_TIMEOUT:-300}"
rc=0

# stage NAME ARGS...: runs ferry-bench ARGS under mpirun into $OUT/NAME.{txt,csv}.
stage() {
  local name="$1"; shift
  [[ " $STAGES " == *" $name "* ]] || return 0
  local t0=$SECONDS
  timeout "$LIMIT" "${M[@]}" "$@" --csv "$OUT/$name.csv" >"$OUT/$name.txt" 2>&1
  local r=$?
  echo "== $name: rc=$r, $((SECONDS - t0)) s"
  [ $r -ne 0 ] && rc=$r
  return 0
}

AR_ARGS=(allreduce --sizes "256K,1M,16M,64M" --dtypes bf16)
EP_ARGS=(ep --layout expanded --aligned --stages --halves)
stage ar_sm "${VNODES[@]}" -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 "$BENCH" "${AR_ARGS[@]}"
stage ar_tcp "${VNODES[@]}" -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 "$BENCH" "${AR_ARGS[@]}"
stage ep_sm "${VNODES[@]}" -x UCX_TLS=sm,self -x NCCL_P2P_DISABLE=1 "$BENCH" "${EP_ARGS[@]}"
stage ep_tcp "${VNODES[@]}" -x UCX_TLS=tcp,self -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 "$BENCH" "${EP_ARGS[@]}"
stage ep_cuda_ipc "${VNODES[@]}" -x UCX_TLS=sm,cuda_ipc,cuda_copy -x FERRY_UCX_GPU_MEMORY=on \
  -x FERRY_UCX_PEER_FAILURE=0 -x NCCL_P2P_DISABLE=1 "$BENCH" "${EP_ARGS[@]}" --no-nccl
stage ep_nvlink "$BENCH" ep --layout expanded --aligned --no-nccl
PF=(-x UCX_TLS=tcp,self -x FERRY_UCX_PEER_FAILURE=1 -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1)
stage ar_tcp_pf "${VNODES[@]}" "${PF[@]}" "$BENCH" "${AR_ARGS[@]}"
stage ep_tcp_pf "${VNODES[@]}" "${PF[@]}" "$BENCH" "${EP_ARGS[@]}"

python3 "$ROOT/scripts/crossnode_table.py" "$OUT" | tee "$OUT/crossnode_table.txt"
exit $rc
