#!/usr/bin/env bash
# Installs an existing build into a temporary prefix, builds tests/install (a
# separate CMake project that uses find_package(ferry) and ferry::ferry) against
# it, and runs it. Needs no GPU. Run after a build (scripts/test.sh does).
#
# Environment: BUILD_DIR (default build).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # sets ROOT, enters it
BUILD_DIR="${BUILD_DIR:-build}"
[ -f "$BUILD_DIR/CMakeCache.txt" ] || { echo "check_install: no build in $BUILD_DIR (build first)" >&2; exit 1; }

ferry_cuda_path

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

echo "check_install: installing $BUILD_DIR into $prefix"
cmake --install "$BUILD_DIR" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S tests/install -B "$work/consumer" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
if ! "$work/consumer/ferry_install_consumer"; then
  echo "check_install: the consumer failed; its shared libraries:" >&2
  ldd "$work/consumer/ferry_install_consumer" >&2 || true
  if ldd "$work/consumer/ferry_install_consumer" 2>/dev/null | grep -q 'libcuda.so.1 => not found'; then
    echo "check_install: libferry needs libcuda.so.1 (the driver), absent on machines without a GPU:" \
      "load driver entry points at run time (cudaGetDriverEntryPointByVersion) instead of linking CUDA::cuda_driver" >&2
  fi
  exit 1
fi
# The NCCL drop-in, where this build made it (issue 25): installed beside libferry, which it
# finds through its RUNPATH ($ORIGIN), exporting NCCL's API and the shim's own function, with
# its header.
if [ -f "$BUILD_DIR/nccl_shim/libferry_nccl.so" ]; then
  shim="$(find "$prefix" -name libferry_nccl.so -print -quit)"
  [ -n "$shim" ] || { echo "check_install: libferry_nccl.so was built but not installed" >&2; exit 1; }
  for sym in ncclAllReduce ncclCommInitRank ncclGetVersion ncclGroupEnd ferryNcclShimStats; do
    nm -D --defined-only "$shim" | grep -qw "$sym" ||
      { echo "check_install: the installed libferry_nccl.so does not export $sym" >&2; exit 1; }
  done
  [ -f "$prefix/include/ferry_nccl_ext.h" ] || { echo "check_install: ferry_nccl_ext.h is not installed" >&2; exit 1; }
  if ldd "$shim" | grep -E 'libferry\.so[^ ]* => not found'; then
    echo "check_install: the installed libferry_nccl.so does not find libferry next to it" >&2
    exit 1
  fi
  echo "check_install: libferry_nccl.so installed ($shim)"
fi
echo "check_install: PASSED"
