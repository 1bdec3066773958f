# shellcheck shell=bash
# Shared by the scripts in this directory; sourced, not run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#
# Sourcing it sets ROOT (the repository root) and enters it, and defines the
# functions below; each script calls those it needs.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

# nvcc: /usr/local/cuda/bin is often not on PATH on a fresh machine.
ferry_cuda_path() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
}

# Sets OUT to the absolute path of the output folder ($OUT, default ./out), created.
ferry_out_dir() {
  OUT="${OUT:-./out}"
  mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)"
}

# The run-time environment of every script that runs MPI jobs or GPU code:
# OpenMPI as root, on one host, with more ranks than cores and no network; never
# NVLink multicast objects (the GPU host is shared); nvcc on PATH.
ferry_export_env() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  ferry_cuda_path
}

# Prints how many NVIDIA GPUs nvidia-smi lists (0 without nvidia-smi).
ferry_gpu_count() {
  local n=0
  if command -v nvidia-smi >/dev/null 2>&1; then n="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"; fi
  echo "${n:-0}"
}

# Runs scripts/setup.sh --cmake-args (installs what is missing) and keeps its
# output, one CMake argument per line, in FERRY_SETUP_ARGS. Returns setup.sh's
# status. Run from the repository root.
ferry_setup() {
  FERRY_SETUP_ARGS="$(scripts/setup.sh --cmake-args)" || return
  # A newer CMake that setup.sh installed for a non-root user.
  if [ "$(id -u)" -ne 0 ] && [ -x "$HOME/.local/share/ferry-tools/bin/cmake" ]; then
    export PATH="$HOME/.local/bin:$PATH"
  fi
}

# ferry_cmake_args BUILD_DIR [ARG...]: sets the array cmake_args to the configure
# command's arguments: a Release build of . into BUILD_DIR (with ninja when the
# build directory is new and ninja is there), then the ARGs, then the lines of
# FERRY_SETUP_ARGS (from ferry_setup).
ferry_cmake_args() {
  local build_dir="$1"
  shift
  cmake_args=(-S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release)
  if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    cmake_args+=(-G Ninja)
  fi
  cmake_args+=("$@")
  if [ -n "${FERRY_SETUP_ARGS:-}" ]; then
    local -a extra
    mapfile -t extra <<<"$FERRY_SETUP_ARGS"
    cmake_args+=("${extra[@]}")
  fi
}

# ferry_cmake_args for a build on the GPU machine: sm_90 unless FERRY_CUDA_ARCHS says
# otherwise, GoogleTest from .deps/googletest when carried there, and CMake 4's
# minimum-policy override (older GoogleTest trees ask for CMake < 3.5). Extra
# arguments are appended.
ferry_device_cmake_args() {
  local build_dir="$1"
  shift
  local -a device_args=(-DFERRY_CUDA_ARCHS="${FERRY_CUDA_ARCHS:-90}" -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  [ -f "$ROOT/.deps/googletest/CMakeLists.txt" ] && device_args+=(-DFERRY_GTEST_SOURCE_DIR="$ROOT/.deps/googletest")
  # FERRY_EP_TRACE=1: the EP kernels print per-phase timestamps (NOTE [EP trace]); use its own BUILD_DIR.
  [ "${FERRY_EP_TRACE:-0}" = 1 ] && device_args+=(-DFERRY_EP_TRACE=ON)
  ferry_cmake_args "$build_dir" "${device_args[@]}" "$@"
}

# NCCL from a Python wheel (-DNCCL_ROOT=... in cmake_args): its library directory
# must be found at run time too.
ferry_nccl_library_path() {
  local a
  for a in "${cmake_args[@]}"; do
    case "$a" in -DNCCL_ROOT=*) export LD_LIBRARY_PATH="${a#-DNCCL_ROOT=}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  done
}
