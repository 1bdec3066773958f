#!/usr/bin/env bash
# Builds ferry and runs it on this machine's GPUs: the allreduce example (checks
# results), then ferry-bench allreduce (ferry against NCCL). One rank per GPU.
#
#   scripts/run_main.sh [ferry-bench allreduce options...]
#
# Environment: FERRY_NP (ranks; default: every GPU), BUILD_DIR (default build),
# FERRY_JOBS (build jobs; default: all cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${FERRY_JOBS:-$(nproc)}"

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
fi
if [ "${gpus:-0}" -eq 0 ]; then
  echo "run_main: no NVIDIA GPU found (nvidia-smi -L lists none): ferry runs one rank per GPU." >&2
  echo "run_main: on a machine without GPUs, run scripts/test.sh (GPU tests report SKIPPED)." >&2
  exit 1
fi
NP="${FERRY_NP:-$gpus}"
if ! [[ "$NP" =~ ^[0-9]+$ ]] || [ "$NP" -lt 1 ] || [ "$NP" -gt "$gpus" ]; then
  echo "run_main: FERRY_NP=$NP, but this machine has $gpus GPUs (one rank per GPU)" >&2
  exit 1
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# Never create NVLink multicast objects (the GPU host is shared).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake_extra="$(scripts/setup.sh --cmake-args)"
if [ "$(id -u)" -ne 0 ] && [ -x "$HOME/.local/share/ferry-tools/bin/cmake" ]; then
  export PATH="$HOME/.local/bin:$PATH"
fi
cmake_args=(-S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  cmake_args+=(-G Ninja)
fi
if [ -n "$cmake_extra" ]; then
  mapfile -t extra <<<"$cmake_extra"
  cmake_args+=("${extra[@]}")
  # NCCL from a Python wheel: its directory must be found at run time too.
  for a in "${extra[@]}"; do
    case "$a" in -DNCCL_ROOT=*) export LD_LIBRARY_PATH="${a#-DNCCL_ROOT=}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  done
fi

echo "==> configure"
cmake "${cmake_args[@]}"
echo "==> build ($JOBS jobs)"
cmake --build "$BUILD_DIR" --parallel "$JOBS" --target ferry-example-allreduce ferry-bench

mpirun_args=(--bind-to none -np "$NP")
[ "$(id -u)" -eq 0 ] && mpirun_args=(--allow-run-as-root "${mpirun_args[@]}")

echo "==> allreduce example on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/examples/ferry-example-allreduce"
echo "==> ferry-bench allreduce on $NP GPUs"
mpirun "${mpirun_args[@]}" "$BUILD_DIR/bench/ferry-bench" allreduce "$@"
