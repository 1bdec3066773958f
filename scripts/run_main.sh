#!/usr/bin/env bash
# Builds ferry and runs it on this machine's GPUs, one rank per GPU, stopping at
# the first failure:
#   1. ferry-example-allreduce   (checks its results)
#   2. ferry-bench allreduce     (ferry against NCCL)
#   3. ferry-example-ep          (dispatch, host experts, combine; checks its results)
#   4. ferry-bench ep            (dispatch/combine against an NCCL all-to-all)
#   5. examples/moe_layer.py     (a PyTorch MoE layer through ferry under torchrun,
#                                 checked against the same layer on one GPU; when
#                                 the Python module is built, see scripts/setup.sh)
#
#   scripts/run_main.sh [ferry-bench allreduce options...]
#
# Environment: FERRY_NP (ranks; default: every GPU), BUILD_DIR (default build),
# FERRY_JOBS (build jobs; default: all cores), FERRY_EP_BENCH_ARGS (options for
# ferry-bench ep, split on spaces, e.g. "--mode ll --check"; on a rank count
# that does not divide 256 the script passes --experts 256/N*N unless you do).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # sets ROOT, enters it
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${FERRY_JOBS:-$(nproc)}"

gpus="$(ferry_gpu_count)"
if [ "$gpus" -eq 0 ]; then
  echo "run_main: no NVIDIA GPU found (nvidia-smi -L lists none): ferry runs one rank per GPU." >&2
  echo "run_main: on a machine without GPUs, run scripts/test.sh (GPU tests report SKIPPED)." >&2
  exit 1
fi
NP="${FERRY_NP:-$gpus}"
if ! [[ "$NP" =~ ^[0-9]+$ ]] || [ "$NP" -lt 1 ] || [ "$NP" -gt "$gpus" ]; then
  echo "run_main: FERRY_NP=$NP, but this machine has $gpus GPUs (one rank per GPU)" >&2
  exit 1
fi

ferry_export_env              # OpenMPI as root, no NVLink multicast, nvcc on PATH
ferry_setup                   # installs what is missing; CMake arguments for this machine
ferry_cmake_args "$BUILD_DIR"  # -> cmake_args
ferry_nccl_library_path       # the bench finds a wheel's NCCL at run time

echo "==> configure"
cmake "${cmake_args[@]}"
echo "==> build ($JOBS jobs)"
cmake --build "$BUILD_DIR" --parallel "$JOBS" --target ferry-example-allreduce ferry-example-ep ferry-bench
py_built=0
if grep -q '^FERRY_BUILD_PYTHON:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  cmake --build "$BUILD_DIR" --parallel "$JOBS" --target ferry_python && py_built=1
fi

mpirun_args=(--bind-to none -np "$NP")
[ "$(id -u)" -eq 0 ] && mpirun_args=(--allow-run-as-root "${mpirun_args[@]}")

echo "==> allreduce example on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/examples/ferry-example-allreduce"
echo "==> ferry-bench allreduce on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/bench/ferry-bench" allreduce "$@"

read -r -a ep_bench_args <<<"${FERRY_EP_BENCH_ARGS:-}"
# The reference model has 256 experts; on a rank count that does not divide 256,
# take the largest multiple of it below (unless the caller chose --experts).
if [ $((256 % NP)) -ne 0 ] && ! [[ " ${ep_bench_args[*]:-} " == *" --experts"* ]]; then
  ep_bench_args+=(--experts "$((256 / NP * NP))")
fi
echo "==> EP example on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/examples/ferry-example-ep"
echo "==> ferry-bench ep on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/bench/ferry-bench" ep "${ep_bench_args[@]}"

if [ "$py_built" -eq 1 ]; then
  echo "==> PyTorch MoE layer example on $NP GPUs (torchrun)"
  PYTHONPATH="$ROOT/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m torch.distributed.run --standalone --nproc-per-node "$NP" examples/moe_layer.py
fi
