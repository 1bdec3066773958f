#!/usr/bin/env bash
# Installs what building and testing ferry needs, and only what is missing.
#
# Works on a fresh Debian 12 / Ubuntu machine (apt-get, as root or through sudo)
# and on the GPU machine, where everything is already there and there is no
# network: when nothing is missing, nothing is installed and apt-get is not run.
# Not installed here: the CUDA toolkit (nvcc, and NCCL for the bench baseline),
# which must already be at /usr/local/cuda or on PATH.
#
#   scripts/setup.sh               check and install
#   scripts/setup.sh --cmake-args  the same, then print extra CMake arguments for
#                                  this machine on stdout, one per line
#                                  (NCCL_ROOT, CUDA compiler, the Python module);
#                                  messages go to stderr
#
# UCX for the inter-node transport: the libucx-cu13 wheel (pip), copied to
# .deps/ucx; FERRY_UCX=0 leaves it out, FERRY_UCX_ROOT names another UCX.
#
# The Python package (python/ferry) needs python3 with torch, nanobind, pytest and
# numpy; missing ones are installed with pip (torch from PyPI). FERRY_PYTHON=0
# skips all of it and builds without the Python module.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PRINT_CMAKE_ARGS=0
for arg in "$@"; do
  case "$arg" in
    --cmake-args) PRINT_CMAKE_ARGS=1 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

say() { echo "setup: $*" >&2; }

# nvcc: /usr/local/cuda/bin is often not on PATH on a fresh machine.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# CMake >= 3.24 (device code is C++17, so Debian 12's 3.25.1 is enough); an
# older one is replaced by one from PyPI (see below).
FERRY_MIN_CMAKE="${FERRY_MIN_CMAKE:-3.24}"
version_ge() {  # version_ge A B: A >= B
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}
cmake_ok() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v
  v="$(cmake --version | head -n1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1)"
  version_ge "${v:-0}" "$FERRY_MIN_CMAKE"
}
gtest_ok() {
  test -f /usr/include/gtest/gtest.h || test -d /usr/src/googletest ||
    test -f "$ROOT/.deps/googletest/CMakeLists.txt"
}

required=()   # missing and needed
optional=()   # missing, nice to have
command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1 ||
  required+=(libopenmpi-dev openmpi-bin)
gtest_ok || required+=(libgtest-dev googletest)
command -v cmake >/dev/null 2>&1 || required+=(cmake)
command -v g++ >/dev/null 2>&1 || required+=(g++)
command -v ninja >/dev/null 2>&1 || optional+=(ninja-build)
if ! command -v ninja >/dev/null 2>&1 && ! command -v make >/dev/null 2>&1; then
  required+=(make)
fi

apt_install() {
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      say "not root and no sudo: install these yourself: $*"; return 1
    fi
  fi
  command -v apt-get >/dev/null 2>&1 || { say "no apt-get: install these yourself: $*"; return 1; }
  say "installing: $*"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

if [ "${#required[@]}" -gt 0 ]; then
  apt_install "${required[@]}" "${optional[@]}" || { say "could not install: ${required[*]}"; exit 1; }
elif [ "${#optional[@]}" -gt 0 ]; then
  # Optional only: try, but never fail for it (the GPU machine has no network).
  apt_install "${optional[@]}" || say "skipped optional packages: ${optional[*]} (make is used instead)"
fi

# CMake too old (Debian 12): the PyPI wheel, in a virtual environment of its own,
# linked into /usr/local/bin (root) or ~/.local/bin.
if ! cmake_ok; then
  say "cmake $(cmake --version 2>/dev/null | head -n1 | grep -oE '[0-9.]+' || echo none) is older than $FERRY_MIN_CMAKE: installing a newer one from PyPI"
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    apt_install python3-venv python3-pip || true
  fi
  if [ "$(id -u)" -eq 0 ]; then tools=/opt/ferry-tools; bindir=/usr/local/bin
  else tools="$HOME/.local/share/ferry-tools"; bindir="$HOME/.local/bin"; fi
  if [ ! -x "$tools/bin/cmake" ]; then
    if ! { python3 -m venv "$tools" && "$tools/bin/python" -m pip install -q "cmake>=${FERRY_MIN_CMAKE},<4"; } >&2; then
      say "could not install cmake from PyPI into $tools"; exit 1
    fi
  fi
  mkdir -p "$bindir"
  for tool in cmake ctest cpack; do ln -sf "$tools/bin/$tool" "$bindir/$tool"; done
  hash -r
  case ":$PATH:" in *":$bindir:"*) ;; *) say "add $bindir to PATH (it holds $("$tools/bin/cmake" --version | head -n1))"; export PATH="$bindir:$PATH" ;; esac
fi

# Final check: everything required is here now.
missing=()
command -v mpirun >/dev/null 2>&1 || missing+=(mpirun)
command -v mpicxx >/dev/null 2>&1 || missing+=(mpicxx)
gtest_ok || missing+=(googletest)
cmake_ok || missing+=("cmake>=$FERRY_MIN_CMAKE")
command -v nvcc >/dev/null 2>&1 || missing+=("nvcc (CUDA toolkit, expected at /usr/local/cuda)")
if [ "${#missing[@]}" -gt 0 ]; then
  say "still missing: ${missing[*]}"
  exit 1
fi

# .deps/googletest: a GoogleTest source tree that travels with the working tree to
# machines without GoogleTest (the GPU machine). Seeded from Debian's copy.
if [ ! -f "$ROOT/.deps/googletest/CMakeLists.txt" ] && [ -f /usr/src/googletest/CMakeLists.txt ]; then
  if ! { mkdir -p "$ROOT/.deps" && cp -r /usr/src/googletest "$ROOT/.deps/googletest"; } 2>/dev/null; then
    say "could not copy /usr/src/googletest to .deps/googletest (not needed here)"
  fi
fi

# Python: the module ferry._C and the pytest suite (tests/python).
PYTHON_MODULES=(torch nanobind pytest numpy)
python_missing() {
  local m out=()
  for m in "${PYTHON_MODULES[@]}"; do python3 -c "import $m" >/dev/null 2>&1 || out+=("$m"); done
  echo "${out[*]}"
}
BUILD_PYTHON=OFF
if [ "${FERRY_PYTHON:-1}" != 0 ]; then
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-pip || { say "could not install python3"; exit 1; }
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || { say "could not install pip"; exit 1; }
  missing_py="$(python_missing)"
  if [ -n "$missing_py" ]; then
    say "installing Python packages with pip: $missing_py"
    # shellcheck disable=SC2086
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check $missing_py >&2 ||
      { say "could not pip install: $missing_py (FERRY_PYTHON=0 builds without the Python module)"; exit 1; }
    missing_py="$(python_missing)"
    [ -z "$missing_py" ] || { say "still missing Python modules: $missing_py"; exit 1; }
  fi
  BUILD_PYTHON=ON
fi

# UCX (the inter-node transport): FERRY_UCX_ROOT if set, else .deps/ucx, a
# stripped copy of the libucx-cu13 wheel's tree (headers, libraries, transport
# modules, ucx_perftest, ucx_info) that travels with the working tree to
# machines without pip; the wheel is installed with pip when missing.
# FERRY_UCX=0 builds without UCX (inter-node off).
UCX_ROOT="${FERRY_UCX_ROOT:-}"
if [ -z "$UCX_ROOT" ] && [ "${FERRY_UCX:-1}" != 0 ]; then
  deps_ucx="$ROOT/.deps/ucx"
  if [ ! -f "$deps_ucx/include/ucp/api/ucp.h" ]; then
    wheel_dir="$(python3 -c 'import libucx, os; print(os.path.dirname(libucx.__file__))' 2>/dev/null || true)"
    if [ -z "$wheel_dir" ] && python3 -m pip --version >/dev/null 2>&1; then
      say "installing UCX with pip: libucx-cu13"
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check libucx-cu13 >&2 ||
        say "could not pip install libucx-cu13: building without the inter-node transport"
      wheel_dir="$(python3 -c 'import libucx, os; print(os.path.dirname(libucx.__file__))' 2>/dev/null || true)"
    fi
    if [ -n "$wheel_dir" ] && [ -f "$wheel_dir/include/ucp/api/ucp.h" ]; then
      say "UCX from the libucx-cu13 wheel: $wheel_dir -> $deps_ucx"
      rm -rf "$deps_ucx.tmp" && mkdir -p "$deps_ucx.tmp/lib/ucx" "$deps_ucx.tmp/bin"
      cp -r "$wheel_dir/include" "$deps_ucx.tmp/"
      for f in "$wheel_dir"/lib/lib*.so.0; do cp -L "$f" "$deps_ucx.tmp/lib/"; done
      for f in "$wheel_dir"/lib/ucx/lib*.so.0; do cp -L "$f" "$deps_ucx.tmp/lib/ucx/"; done
      for b in ucx_info ucx_perftest; do cp "$wheel_dir/bin/$b" "$deps_ucx.tmp/bin/"; done
      # ucx_perftest's own dependencies (libgomp, libcudart), vendored beside the wheel
      for f in "$wheel_dir"/../libucx_cu13.libs/*; do [ -f "$f" ] && cp -L "$f" "$deps_ucx.tmp/lib/"; done
      if command -v strip >/dev/null 2>&1; then
        strip --strip-unneeded "$deps_ucx.tmp"/lib/*.so.0 "$deps_ucx.tmp"/lib/ucx/*.so.0 "$deps_ucx.tmp"/bin/* 2>/dev/null || true
      fi
      rm -rf "$deps_ucx" && mv "$deps_ucx.tmp" "$deps_ucx"
    fi
  fi
  [ -f "$deps_ucx/include/ucp/api/ucp.h" ] && UCX_ROOT="$deps_ucx"
fi

if [ "$PRINT_CMAKE_ARGS" -eq 1 ]; then
  echo "-DFERRY_BUILD_PYTHON=$BUILD_PYTHON"
  if [ -n "$UCX_ROOT" ]; then echo "-DFERRY_UCX_ROOT=$UCX_ROOT"; fi
  if [ "$BUILD_PYTHON" = ON ]; then
    echo "-DPython_EXECUTABLE=$(python3 -c 'import sys; print(sys.executable)')"
  fi
  nvcc_path="$(command -v nvcc)"
  echo "-DCMAKE_CUDA_COMPILER=$nvcc_path"
  # NCCL (bench baseline only): the CUDA toolkit's, else the Python venv's wheel.
  cuda_home="$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")"
  if [ ! -f "$cuda_home/include/nccl.h" ] && [ ! -f /usr/local/cuda/include/nccl.h ] &&
     [ ! -f /usr/include/nccl.h ] && [ -z "${NCCL_ROOT:-}" ]; then
    nccl_root=""
    if command -v python3 >/dev/null 2>&1; then
      nccl_root="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
      if [ -z "$nccl_root" ] || [ ! -f "$nccl_root/include/nccl.h" ]; then
        nccl_root=""
        while IFS= read -r sp; do
          [ -d "$sp/nvidia" ] || continue
          h="$(find "$sp/nvidia" -maxdepth 4 -name nccl.h -path '*include*' 2>/dev/null | head -n1)"
          if [ -n "$h" ]; then nccl_root="$(dirname "$(dirname "$h")")"; break; fi
        done < <(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null || true)
      fi
    fi
    if [ -n "$nccl_root" ]; then
      say "NCCL from Python packages: $nccl_root"
      echo "-DNCCL_ROOT=$nccl_root"
    else
      say "NCCL not found: ferry-bench will run without its NCCL baseline"
    fi
  elif [ -n "${NCCL_ROOT:-}" ]; then
    echo "-DNCCL_ROOT=$NCCL_ROOT"
  fi
fi
exit 0
