#!/usr/bin/env bash
# Builds ferry and runs every test: unit (CPU), mp (several processes, CPU), gpu
# (reported SKIPPED where there is no GPU), then checks the installed package.
# Installs what is missing first (scripts/setup.sh). Exits non-zero on any failure.
#
# Environment: BUILD_DIR (default build), FERRY_JOBS (default: all cores),
# FERRY_CTEST_TIMEOUT (seconds per test, default 600).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # sets ROOT, enters it
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${FERRY_JOBS:-$(nproc)}"

ferry_export_env              # OpenMPI as root, no NVLink multicast, nvcc on PATH
ferry_setup                   # installs what is missing; CMake arguments for this machine
ferry_cmake_args "$BUILD_DIR"  # -> cmake_args

echo "==> configure: cmake ${cmake_args[*]}"
cmake "${cmake_args[@]}"
echo "==> build ($JOBS jobs)"
cmake --build "$BUILD_DIR" --parallel "$JOBS"
echo "==> install check"
BUILD_DIR="$BUILD_DIR" scripts/check_install.sh
# ctest last, so its summary ("100% tests passed, 0 tests failed out of N") closes the output.
echo "==> test"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "${FERRY_CTEST_TIMEOUT:-600}" </dev/null
