#!/usr/bin/env bash
# Builds ferry and runs every test: unit (CPU), mp (several processes, CPU), gpu
# (reported SKIPPED where there is no GPU), then checks the installed package.
# Installs what is missing first (scripts/setup.sh). Exits non-zero on any failure.
#
# Environment: BUILD_DIR (default build), FERRY_JOBS (default: all cores),
# FERRY_CTEST_TIMEOUT (seconds per test, default 600).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${FERRY_JOBS:-$(nproc)}"

# OpenMPI as root, on one host, with more ranks than cores and no network.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# Never create NVLink multicast objects (the GPU host is shared).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake_extra="$(scripts/setup.sh --cmake-args)"
# A newer CMake that setup.sh installed for a non-root user.
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
fi

echo "==> configure: cmake ${cmake_args[*]}"
cmake "${cmake_args[@]}"
echo "==> build ($JOBS jobs)"
cmake --build "$BUILD_DIR" --parallel "$JOBS"
echo "==> install check"
BUILD_DIR="$BUILD_DIR" scripts/check_install.sh
# ctest last, so its summary ("100% tests passed, 0 tests failed out of N") closes the output.
echo "==> test"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "${FERRY_CTEST_TIMEOUT:-600}" </dev/null
