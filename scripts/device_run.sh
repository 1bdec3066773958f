#!/usr/bin/env bash
# The one script to run on the GPU machine (Ubuntu 24.04, CUDA at /usr/local/cuda,
# OpenMPI, CMake + ninja on PATH, 2/4/8 GPUs, root, no network; GoogleTest comes
# from .deps/googletest, which scripts/setup.sh seeds on a machine that has it).
#
# Stages, each logged to $OUT/<stage>.log; a failing stage does not stop the
# others. A summary (PASS/FAIL/SKIP and seconds per stage) and the end of the
# bench table are printed last; the exit status is non-zero if any stage failed.
#
#   setup      scripts/setup.sh (installs nothing when everything is present)
#   configure  cmake into build-device (Release, ninja, NCCL found for the bench)
#   build      all targets, all cores
#   gpus       nvidia-smi -L and the topology matrix
#   ctest      the CPU tests: ctest -R 'unit|mp|net' (net: the proxy over UCX tcp and shm, killed peers)
#   gpu_npN    mpirun -np N build-device/tests/ferry_gpu_tests, N in FERRY_NPS
#   (restricted_*, mps_pct_np2, gpu_faults*, python_faults, soak_* and memcheck_2x1_*: scripts/device_stages_robustness.sh)
#   gpu_faults build-device/tests/ferry_gpu_fault_tests (not mpirun: it forks its own ranks and SIGKILLs
#              one mid AllReduce / EP call; ranks share the GPUs, time-sliced; FERRY_FAULT_* knobs)
#   gpu_faults_cuda_ipc  its cross-node cases with windows in GPU memory over cuda_ipc (2+ GPUs)
#   win_*      the device API (ferry_gpu_window_tests) across virtual nodes: win_n2 (one node),
#              win_2x1_tcp, win_2x1_sm, win_2x1, win_4x1, win_2x2, win_2x2_tcp (NxK: N nodes of K
#              ranks through FERRY_RANKS_PER_NODE; _tcp/_sm: UCX_TLS, else UCX's choice)
#   memcheck   compute-sanitizer memcheck on FERRY_SANITIZE_NP ranks (2)  (only with FERRY_SANITIZE=1)
#   racecheck  compute-sanitizer racecheck on FERRY_SANITIZE_NP ranks (2) (only with FERRY_SANITIZE=1)
#   synccheck  compute-sanitizer synccheck, the same way
#   memcheck_2x1_sm, memcheck_2x1_cuda_ipc  memcheck of small EP cases and the hierarchical AllReduce on 2
#              virtual nodes: mapped peers over shared memory; windows in GPU memory over cuda_ipc (2+ GPUs)
#   example    the allreduce example on the largest N
#   example_ep the EP example (dispatch, host experts, combine, checked) on the largest N
#   example_put the gpu_put example on 2 ranks: one node, then 2 virtual nodes (through UCX)
#   bench      ferry-bench allreduce --csv $OUT/allreduce.csv on the largest N
#   bench_ep   ferry-bench ep --csv $OUT/ep.csv on the largest N
#   bench_nvlink ferry-bench nvlink --csv $OUT/nvlink.csv on the largest N (copy methods x SMs)
#   nodes_*    the GPU suite's cross-node tests (FERRY_NODES_FILTER, default *AllReduce*) on virtual
#              nodes: nodes_2x1_tcp, nodes_4x1, nodes_2x2, nodes_2x1_cuda_ipc (GPU-memory windows over UCX
#              cuda_ipc) (FERRY_NODES_CONFIGS, NAME:RANKS:PER_NODE:TLS[:direct|gpumem]);
#              nodes_2x2_direct: the EP tests (FERRY_NODES_DIRECT_FILTER, default Ep*) with
#              FERRY_EP_HIERARCHICAL=0 (a 5th field "direct": high-throughput's direct path)
#   soak_npN   mpirun -np N build-device/tests/ferry_gpu_soak, N in FERRY_SOAK_NPS (only with FERRY_SOAK=1):
#              EP dispatch/combine and AllReduce soaks (10,000 calls each, checked periodically, device
#              and host memory compared after warm-up and at the end); ranks share GPUs where N exceeds
#              them; an entry NxK runs N virtual nodes of K ranks (log soak_NxK.log). Own timeout.
#   bench_net  ferry-bench net --memory both on 2 ranks (2 virtual nodes) for UCX_TLS in
#              FERRY_NET_TLS (default "tcp,self tcp,self/zcopy sm,self all"; /zcopy: with
#              FERRY_UCX_PEER_FAILURE=0), CSVs in $OUT/net_<tls>.csv
#   bench_nodes ferry-bench ep (and allreduce) on ranks sharing GPU 0 as one node and as virtual
#              nodes, no NCCL (only when FERRY_BENCHES names "nodes"; entries FERRY_BENCH_NODES,
#              NP:RANKS_PER_NODE[:direct], default "2:2 2:1 4:4 4:2 4:2:direct 4:1"; ferry-bench ep gets
#              FERRY_BENCH_NODES_EP_ARGS, default "--warmup 2 --iters 10": time-sliced ranks are slow)
#   python_nodes the Python GPU tests and examples/moe_layer.py on 2 ranks as 2 virtual nodes
#              (only with FERRY_NODES_PY=1)
#   bench_tune scripts/tune_ep.sh on the largest N: the EP tuning knobs swept one at a time
#              (only when FERRY_BENCHES names "tune"; table in $OUT/tune.txt)
#   bench_crossnode scripts/device_crossnode.sh on 2 GPUs: issue 24's table (2 virtual nodes over sm,
#              tcp and cuda_ipc against NCCL and NVLink; only when FERRY_BENCHES names "crossnode";
#              files in $OUT/crossnode/)
#   pip        pip wheel . (scikit-build-core), installed into a folder and imported
#              (built in the background while the GPU stages run)
#   python_cpu pytest tests/python/test_cpu_validation.py, test_cpu_allreduce_args.py, test_cpu_own_rows_first.py,
#              test_cpu_zero_copy_combine.py
#   python_npN torchrun -m pytest tests/python on N GPUs, N in FERRY_PY_NPS
#   python_mpi mpirun -np N pytest tests/python/test_mpi_init.py (ferry.init() from MPI)
#   example_py torchrun examples/moe_layer.py on the largest N, both modes
#   bench_py   torchrun bench/python/ferry_torch_bench.py (table, CSV, PNG in $OUT)
#   nccl_shim  scripts/device_nccl_shim.sh on 2 GPUs (libferry_nccl.so: GPU test on/off, PyTorch under
#              LD_PRELOAD, cost per call, nccl-tests all_reduce_perf; logs in $OUT/nccl_shim)
#
# Environment:
#   OUT                    where logs and the CSV go (default ./out)
#   FERRY_NPS              rank counts for the GPU tests (default "1 2 4 8", capped by the GPU count)
#   FERRY_VIRTUAL_RANKS=1  let FERRY_NPS (up to 8) exceed the GPU count for the GPU tests, sanitizers,
#                          C++ examples and python_npN (gloo there): ranks share GPUs (correctness only;
#                          benches stay one rank per GPU)
#   FERRY_SKIP_TESTS=1     skip ctest, gpu_npN and the sanitizers (FERRY_SKIP_CTEST=1: ctest only)
#   FERRY_SKIP_BENCH=1     skip both benches
#   FERRY_BENCHES          which benches run (default "allreduce ep nvlink net torch"; torch: bench_py;
#                          "tune" adds bench_tune, "crossnode" bench_crossnode)
#   FERRY_TUNE_ARGS        more arguments for ferry-bench ep in bench_tune (sweeps: FERRY_TUNE_SWEEPS)
#   FERRY_BENCH_ARGS       more arguments for ferry-bench allreduce
#   FERRY_EP_BENCH_ARGS    more arguments for ferry-bench ep (e.g. "--mode ll --check")
#   FERRY_BENCH_TAIL       lines of each bench's output shown at the end (default 60)
#   FERRY_SANITIZE=1       run the compute-sanitizer stages
#   FERRY_SANITIZE_NP      ranks of the sanitizer stages (default 2)
#   FERRY_SANITIZE_FILTER  gtest filter for them (default: heap, bf16 AllReduce matrix, graph replay, small EP cases)
#   FERRY_SANITIZE_NODES_FILTER  gtest filter of memcheck_2x1_sm / memcheck_2x1_cuda_ipc (small EP cases, hierarchical AllReduce)
#   FERRY_PY_NPS           rank counts for the Python GPU tests (default: FERRY_NPS without 1)
#   FERRY_PY_BENCH_ARGS    more arguments for the Python bench
#   FERRY_SKIP_PIP=1       skip the pip stage
#   FERRY_SKIP_PYTHON=1    skip the Python stages
#   FERRY_STAGE_TIMEOUT    seconds before a test/run stage is killed (default 300)
#   FERRY_MPS              1: start the CUDA MPS daemon (pipe and log folders under the build tree) for the
#                          whole run, so virtual ranks' kernels run concurrently; stopped at exit. 0: never.
#                          Default: 1 with FERRY_VIRTUAL_RANKS=1 where the daemon exists
#   FERRY_WINDOW_CONFIGS   which win_* stages run (default: all of them)
#   FERRY_RESTRICTED_CONFIGS  the restricted_* stages, NAME:RANKS:RANKS_PER_NODE (time-sliced RestrictedSms tests)
#   FERRY_MPS_PCT          CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of stage mps_pct_np2 (25; FERRY_MPS_PCT_SKIP=1 skips it,
#                          FERRY_MPS_PCT_FILTER its gtest filter, default "Ep*:AllReduce*")
#   FERRY_SOAK=1           run the soak stages (also with FERRY_SKIP_TESTS=1, so that a run can be only the soak)
#   FERRY_SOAK_NPS         their rank counts (default "2 4 8"; up to 8; NxK: N virtual nodes of K ranks, e.g. "2x2")
#   FERRY_SOAK_TIMEOUT     seconds before one soak run is killed (default 1200)
#   FERRY_SOAK_EP_CALLS, FERRY_SOAK_AR_CALLS (10000), FERRY_SOAK_CHECK_EVERY (100), FERRY_SOAK_WARMUP (200),
#   FERRY_SOAK_AR_MAX_BYTES (4 MiB), FERRY_SOAK_DEVICE_SLACK_MB (16), FERRY_SOAK_RSS_SLACK_MB (64),
#   FERRY_SOAK_STEADY_{DEVICE,HEAP,RSS}_SLACK_MB (2, 1, 8: the second half's limits)
#                          passed to ferry_gpu_soak when set (tests/gpu/soak.cpp), as are glibc's
#                          MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ and CUDA_MODULE_LOADING
#   FERRY_CMAKE_ARGS       more arguments for cmake at configure time
#   BUILD_DIR              build directory (default build-device)
set -uo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1  # sets ROOT, enters it
# shellcheck source-path=SCRIPTDIR source=device_stages_robustness.sh
source "$ROOT/scripts/device_stages_robustness.sh" || exit 1
BUILD_DIR="${BUILD_DIR:-build-device}"
OUT="${OUT:-./out}"
mkdir -p "$OUT" || exit 1
OUT="$(cd "$OUT" && pwd)"
STAGE_TIMEOUT="${FERRY_STAGE_TIMEOUT:-300}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

ferry_export_env  # OpenMPI as root, no NVLink multicast, nvcc on PATH

ANY_FAILED=0
now() { date +%s.%N; }
record() {  # record STAGE RESULT SECONDS [NOTE]
  local line
  line="$(printf '%-12s %-5s %8.1fs  %s' "$1" "$2" "$3" "${4:-}")"
  echo "$line" >>"$SUMMARY"
  [ "$2" = FAIL ] && ANY_FAILED=1
  echo "=== [$1] $2 (${3}s) ${4:-}"
}
skip() { record "$1" SKIP 0 "$2"; }
# run_stage STAGE COMMAND...: runs it, tees its output into $OUT/STAGE.log.
run_stage() {
  local stage="$1"; shift
  local log="$OUT/$stage.log" t0 rc dt note=""
  echo
  echo "=== [$stage] $*"
  t0="$(now)"
  { echo "\$ $*"; "$@" 2>&1; } | tee "$log"
  rc="${PIPESTATUS[0]}"
  dt="$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
  if [ "$rc" -eq 0 ]; then record "$stage" PASS "$dt"; return 0; fi
  case "$rc" in 124|137) note="timed out after ${STAGE_TIMEOUT}s" ;; *) note="exit $rc" ;; esac
  record "$stage" FAIL "$dt" "$note (log: $log)"
  return "$rc"
}
TO=()
command -v timeout >/dev/null 2>&1 && TO=(timeout -k 20 "$STAGE_TIMEOUT")

# ---------------------------------------------------------------- setup, configure, build
FERRY_SETUP_ARGS=""
setup_stage() { ferry_setup; local rc=$?; echo "$FERRY_SETUP_ARGS"; return $rc; }
# (not in a pipeline: it sets FERRY_SETUP_ARGS)
t0="$(now)"
echo "=== [setup] scripts/setup.sh --cmake-args"
setup_stage >"$OUT/setup.log" 2>&1
rc=$?
cat "$OUT/setup.log"
dt="$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
if [ $rc -eq 0 ]; then record setup PASS "$dt"; else record setup FAIL "$dt" "exit $rc (log: $OUT/setup.log)"; fi

ferry_device_cmake_args "$BUILD_DIR"  # -> cmake_args
ferry_nccl_library_path  # the bench finds a wheel's NCCL at run time
if [ -n "${FERRY_CMAKE_ARGS:-}" ]; then
  read -r -a user_cmake_args <<<"$FERRY_CMAKE_ARGS"
  cmake_args+=("${user_cmake_args[@]}")
fi
BUILT=0
if run_stage configure cmake "${cmake_args[@]}"; then
  run_stage build cmake --build "$BUILD_DIR" --parallel "$(nproc)" && BUILT=1
else
  skip build "configure failed"
fi

# pip wheel . in the background (CPU only), checked after the GPU stages.
PIP_PID=""
PIP_DIR="$OUT/../ferry-pip"
if [ "${FERRY_SKIP_PIP:-0}" != 1 ] && [ "$BUILT" -eq 1 ]; then
  rm -rf "$PIP_DIR" && mkdir -p "$PIP_DIR"
  ( t0="$(now)"
    if CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip wheel --no-build-isolation --no-deps -w "$PIP_DIR/wheel" . &&
       python3 -m pip install --no-deps --target "$PIP_DIR/site" "$PIP_DIR"/wheel/ferry-*.whl &&
       (cd / && PYTHONPATH="$PIP_DIR/site" python3 -c 'import ferry, os; print("imported", ferry.__file__, sorted(os.listdir(os.path.dirname(ferry.__file__))))'); then
      echo "PIP_RESULT PASS $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
    else echo "PIP_RESULT FAIL $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"; fi
  ) >"$OUT/pip.log" 2>&1 &
  PIP_PID=$!
fi

# ---------------------------------------------------------------- GPUs
GPUS=0
# shellcheck disable=SC2317  # called through run_stage
gpu_info() {
  nvidia-smi -L || return 1
  echo
  nvidia-smi topo -m | sed -n '1,/^$/p'  # the matrix, without the legend
}
GPUS="$(ferry_gpu_count)"
if [ "$GPUS" -gt 0 ]; then
  run_stage gpus gpu_info
else
  record gpus FAIL 0 "no GPU (nvidia-smi -L lists none)"
fi

# FERRY_VIRTUAL_RANKS=1: the GPU test stages (gpu_npN, the sanitizers, the C++
# examples, python_npN) may run more ranks than GPUs, ranks sharing GPUs
# (FERRY_TEST_SHARE_GPUS; each rank its own context, time-sliced). That checks the
# protocols at world sizes the machine lacks GPUs for; python_npN then uses gloo
# (NCCL refuses two ranks on one GPU). Benches and the other Python stages stay
# at most one rank per GPU.
VIRTUAL="${FERRY_VIRTUAL_RANKS:-0}"
[ "$VIRTUAL" = 1 ] && [ "$GPUS" -ge 1 ] && export FERRY_TEST_SHARE_GPUS=1
NPS=()
for n in ${FERRY_NPS:-1 2 4 8}; do
  if [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && { [ "$n" -le "$GPUS" ] || { [ "$VIRTUAL" = 1 ] && [ "$GPUS" -ge 1 ] && [ "$n" -le 8 ]; }; }; then NPS+=("$n")
  else echo "device_run: leaving out N=$n ($GPUS GPUs)"; fi
done
NMAX="$GPUS"
if [ "${#NPS[@]}" -gt 0 ]; then NMAX="$(printf '%s\n' "${NPS[@]}" | sort -n | tail -n1)"; fi
NBENCH="$NMAX"  # benches and Python: one rank per GPU
[ "$NBENCH" -gt "$GPUS" ] && NBENCH="$GPUS"
MPIRUN=(mpirun --allow-run-as-root --bind-to none)
[ -n "${FERRY_TEST_SHARE_GPUS:-}" ] && MPIRUN+=(-x FERRY_TEST_SHARE_GPUS)
B="$BUILD_DIR"
export EX="$B/examples/ferry-example-gpu-put" BENCH="$B/bench/ferry-bench" CSV_DIR="$OUT"
case "$B" in /*) B_ABS="$B" ;; *) B_ABS="$ROOT/$B" ;; esac

# MPS: one daemon for the run (virtual ranks' kernels then run at the same time
# instead of time-sliced), its pipe and log folders under the build tree. Default
# (FERRY_MPS unset): on with FERRY_VIRTUAL_RANKS=1 where nvidia-cuda-mps-control
# exists; FERRY_MPS=1 forces it on, FERRY_MPS=0 off. The script says which.
MPS_STARTED=0
MPS_WANTED="${FERRY_MPS:-$([ "$VIRTUAL" = 1 ] && echo 1 || echo 0)}"
if [ "$MPS_WANTED" = 1 ] && [ "$GPUS" -ge 1 ]; then
  if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    export CUDA_MPS_PIPE_DIRECTORY="$B_ABS/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$B_ABS/mps/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      MPS_STARTED=1
      trap 'echo quit | nvidia-cuda-mps-control' EXIT
      MPIRUN+=(-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
    fi
  fi
fi
if [ "$MPS_STARTED" = 1 ]; then echo "device_run: MPS daemon started (ranks sharing a GPU run concurrently)"
else echo "device_run: no MPS daemon (FERRY_MPS=$MPS_WANTED): ranks sharing a GPU are time-sliced"; fi

# ---------------------------------------------------------------- tests
if [ "${FERRY_SKIP_TESTS:-0}" = 1 ] || [ "${FERRY_SKIP_CTEST:-0}" = 1 ]; then
  skip ctest "FERRY_SKIP_TESTS=1 or FERRY_SKIP_CTEST=1"
elif [ "$BUILT" -ne 1 ]; then
  skip ctest "build failed"
else
  run_stage ctest "${TO[@]}" ctest --test-dir "$B" -R 'unit|mp|net' --no-tests=error --output-on-failure
fi
if [ "${#NPS[@]}" -eq 0 ]; then
  skip gpu_tests "no rank count in '${FERRY_NPS:-2 4 8}' fits $GPUS GPUs"
fi
for n in "${NPS[@]}"; do
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "gpu_np$n" "FERRY_SKIP_TESTS=1"; continue; fi
  if [ "$BUILT" -ne 1 ]; then skip "gpu_np$n" "build failed"; continue; fi
  run_stage "gpu_np$n" "${TO[@]}" "${MPIRUN[@]}" -np "$n" "$B/tests/ferry_gpu_tests"
done

robustness_restricted_stages  # scripts/device_stages_robustness.sh
robustness_fault_stages

# The device API across virtual nodes (ranks share the GPU): NAME:RANKS:RANKS_PER_NODE:UCX_TLS
# (RANKS_PER_NODE 0: one node; UCX_TLS all: UCX's choice).
WINDOW_CONFIGS="${FERRY_WINDOW_CONFIGS:-win_n2:2:0:all win_2x1_tcp:2:1:tcp,self win_2x1_sm:2:1:sm,self win_2x1:2:1:all win_4x1:4:1:all win_2x2:4:2:all win_2x2_tcp:4:2:tcp,self win_2x2_eager:4:2:all:eager}"
for cfg in $WINDOW_CONFIGS; do
  IFS=: read -r stage n per_node tls loading <<<"$cfg"
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "$stage" "FERRY_SKIP_TESTS=1"; continue; fi
  if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip "$stage" "build failed or no GPU"; continue; fi
  env_args=(-x FERRY_TEST_SHARE_GPUS=1)
  [ "$per_node" != 0 ] && env_args+=(-x FERRY_RANKS_PER_NODE="$per_node")
  [ "$tls" != all ] && env_args+=(-x UCX_TLS="$tls")
  # UCX over shared memory only: every remote peer's landing is mapped (NOTE [Mapped peers]).
  [ "$tls" = "sm,self" ] && env_args+=(-x FERRY_TEST_EXPECT_MAPPED_PEERS=1)
  # _eager: CUDA_MODULE_LOADING=EAGER (docs/internode.md, "Lazy module loading":
  # the tests load their kernels first, so both loading modes must pass).
  [ "${loading:-}" = eager ] && env_args+=(-x CUDA_MODULE_LOADING=EAGER)
  run_stage "$stage" "${TO[@]}" "${MPIRUN[@]}" -np "$n" "${env_args[@]}" "$B/tests/ferry_gpu_window_tests"
done

# The GPU suite's cross-node tests on virtual nodes: NAME:RANKS:RANKS_PER_NODE:UCX_TLS[:direct|gpumem],
# filter FERRY_NODES_FILTER; "direct": high-throughput EP's direct path instead of the
# hierarchical one (FERRY_EP_HIERARCHICAL=0), filter FERRY_NODES_DIRECT_FILTER; "gpumem":
# windows in GPU memory moved by UCX itself (FERRY_UCX_GPU_MEMORY=on; cuda_ipc between
# the host's GPUs stands in for GPUDirect RDMA; UCX refuses peer-failure handling there).
NODES_CONFIGS="${FERRY_NODES_CONFIGS:-nodes_2x1_tcp:2:1:tcp,self nodes_4x1:4:1:all nodes_2x2:4:2:all nodes_2x2_direct:4:2:all:direct nodes_2x1_cuda_ipc:2:1:sm,cuda_ipc,cuda_copy:gpumem}"
NODES_FILTER="${FERRY_NODES_FILTER:-*AllReduce*:Ep*:Timeout.Hier*}"
NODES_DIRECT_FILTER="${FERRY_NODES_DIRECT_FILTER:-Ep*}"
for cfg in $NODES_CONFIGS; do
  IFS=: read -r stage n per_node tls path <<<"$cfg"
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "$stage" "FERRY_SKIP_TESTS=1"; continue; fi
  if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip "$stage" "build failed or no GPU"; continue; fi
  # cuda_ipc between ranks that share one GPU under MPS: low latency times out on its first dispatch (session 48,
  # docs/results/session48_1xH200 c3/c4: both before and after aligned records; without MPS it passes --check).
  # (Likely: UCX's cuda_ipc copy within one device needs a free SM, which the ranks' spinning low-latency grids
  # hold; docs/internode.md, session 48.) It stands in for GPUDirect between different GPUs, so it runs where each
  # rank has its own.
  if [ "${path:-}" = gpumem ] && [ "$MPS_STARTED" = 1 ] && [ "$GPUS" -lt "$n" ]; then
    skip "$stage" "cuda_ipc needs a GPU per rank here ($GPUS GPU(s), $n ranks, MPS on)"; continue
  fi
  env_args=(-x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE="$per_node")
  [ "$tls" != all ] && env_args+=(-x UCX_TLS="$tls")
  filter="$NODES_FILTER"
  if [ "${path:-}" = direct ]; then env_args+=(-x FERRY_EP_HIERARCHICAL=0); filter="$NODES_DIRECT_FILTER"; fi
  [ "${path:-}" = gpumem ] && env_args+=(-x FERRY_UCX_GPU_MEMORY=on -x FERRY_UCX_PEER_FAILURE=0)
  run_stage "$stage" "${TO[@]}" "${MPIRUN[@]}" -np "$n" "${env_args[@]}" "$B/tests/ferry_gpu_tests" \
    --gtest_filter="$filter"
done

robustness_soak_stages

# The small tests: heap, the bf16 column of the AllReduce matrix, graph replay,
# and small EP cases of each mode (fp8 quantization, halves, handle reuse).
FILTER="${FERRY_SANITIZE_FILTER:-Heap.*:All/AllReduceMatrix.*/*_bf16:AllReduce.GraphReplayWithNewData:Ep/EpMatrix.DispatchCombine/ht_fp8_h2048_k3:Ep/EpMatrix.DispatchCombine/ll_bf16_h2048_k7:Ep.HandleReuse:Ep.FusedAndSeparateLayoutAgree:Ep/EpRankRows.DispatchCombine/bf16_h2048_k3_le4:Ep/EpRankRows.DispatchCombine/fp8_h2048_k7_le1}"
for tool in memcheck racecheck synccheck; do
  if [ "${FERRY_SANITIZE:-0}" != 1 ]; then skip "$tool" "set FERRY_SANITIZE=1"; continue; fi
  if [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "$tool" "FERRY_SKIP_TESTS=1"; continue; fi
  if [ "$BUILT" -ne 1 ]; then skip "$tool" "build failed"; continue; fi
  if [ "$GPUS" -lt "${FERRY_SANITIZE_NP:-2}" ] && [ "$VIRTUAL" != 1 ]; then
    skip "$tool" "needs ${FERRY_SANITIZE_NP:-2} GPUs (or FERRY_VIRTUAL_RANKS=1)"; continue
  fi
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  if [ ! -x "$sanitizer" ]; then record "$tool" FAIL 0 "no compute-sanitizer"; continue; fi
  # Sanitized kernels run far slower: give device waits a long deadline.
  run_stage "$tool" "${TO[@]}" "${MPIRUN[@]}" -np "${FERRY_SANITIZE_NP:-2}" -x FERRY_TIMEOUT_MS=120000 \
    "$sanitizer" --tool "$tool" --error-exitcode 86 \
    "$B/tests/ferry_gpu_tests" --gtest_filter="$FILTER"
done

robustness_nodes_sanitizer_stages  # scripts/device_stages_robustness.sh

# ---------------------------------------------------------------- examples, benches
for ex in example:allreduce example_ep:ep; do
  stage="${ex%%:*}"
  if [ "$BUILT" -ne 1 ]; then
    skip "$stage" "build failed"
  elif [ "$NMAX" -lt 1 ]; then
    skip "$stage" "no GPU"
  else
    run_stage "$stage" "${TO[@]}" "${MPIRUN[@]}" -np "$NMAX" "$B/examples/ferry-example-${ex#*:}"
  fi
done

if [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then
  skip example_put "build failed or no GPU"
else
  run_stage example_put "${TO[@]}" bash -c '"$@" -np 2 -x FERRY_TEST_SHARE_GPUS=1 "$EX" &&
      "$@" -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 "$EX"' example_put "${MPIRUN[@]}"
fi

# bench_stage STAGE SUBCOMMAND ARGS...: ferry-bench SUBCOMMAND --csv $OUT/SUBCOMMAND.csv ARGS
BENCHES="${FERRY_BENCHES:-allreduce ep nvlink net torch}"
bench_stage() {
  local stage="$1" sub="$2"
  shift 2
  rm -f "$OUT/$stage.log" "$OUT/$sub.csv"  # a skipped bench shows no stale table at the end
  if [ "${FERRY_SKIP_BENCH:-0}" = 1 ]; then
    skip "$stage" "FERRY_SKIP_BENCH=1"
  elif [[ " $BENCHES " != *" $sub "* ]]; then
    skip "$stage" "not in FERRY_BENCHES"
  elif [ "$BUILT" -ne 1 ]; then
    skip "$stage" "build failed"
  elif [ "$NMAX" -lt 1 ]; then
    skip "$stage" "no GPU"
  else
    run_stage "$stage" "${TO[@]}" "${MPIRUN[@]}" -np "$NBENCH" \
      "$B/bench/ferry-bench" "$sub" --csv "$OUT/$sub.csv" "$@"
  fi
}
read -r -a bench_args <<<"${FERRY_BENCH_ARGS:-}"
bench_stage bench allreduce "${bench_args[@]}"
read -r -a ep_bench_args <<<"${FERRY_EP_BENCH_ARGS:-}"
bench_stage bench_ep ep "${ep_bench_args[@]}"
bench_stage bench_nvlink nvlink
# bench_nodes (FERRY_BENCHES names "nodes"): ferry-bench ep and allreduce on ranks
# sharing GPU 0, as one node (NVLink path) and as virtual nodes (proxy path, and
# NVLink inside 2x2), no NCCL (it refuses two ranks on one GPU). Correctness-scale figures.
if [[ " $BENCHES " != *" nodes "* ]] || [ "${FERRY_SKIP_BENCH:-0}" = 1 ]; then
  skip bench_nodes "not in FERRY_BENCHES"
elif [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then
  skip bench_nodes "build failed or no GPU"
else
  # Entries NP:RANKS_PER_NODE[:direct] (direct: FERRY_EP_HIERARCHICAL=0); AllReduce on the 2-rank ones and 4:2.
  # shellcheck disable=SC2016  # expanded by the inner bash
  run_stage bench_nodes "${TO[@]}" bash -c 'rc=0; for entry in ${FERRY_BENCH_NODES:-2:2 2:1 4:4 4:2 4:2:direct 4:1}; do
      IFS=: read -r np per_node path <<<"$entry"; tag="${np}ranks_pernode${per_node}${path:+_$path}"
      extra=(); [ "$path" = direct ] && extra=(-x FERRY_EP_HIERARCHICAL=0)
      echo "#### $np ranks on one GPU, FERRY_RANKS_PER_NODE=$per_node ${path:-}"
      "$@" -np "$np" -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=$per_node "${extra[@]}" "$BENCH" ep --no-nccl --halves --check \
        ${FERRY_BENCH_NODES_EP_ARGS:---warmup 2 --iters 10} --csv "$CSV_DIR/ep_$tag.csv" || rc=1
      case "$entry" in 2:*|4:2)
        "$@" -np "$np" -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=$per_node "$BENCH" allreduce --no-nccl --sizes 8K,256K,1M,16M --dtypes bf16 --algos auto --check \
          --csv "$CSV_DIR/allreduce_$tag.csv" || rc=1 ;;
      esac
    done; exit $rc' bench_nodes "${MPIRUN[@]}"
fi
# ferry-bench net: 2 ranks as 2 virtual nodes (sharing GPU 0 when there is one GPU).
rm -f "$OUT/bench_net.log" "$OUT"/net_*.csv
if [ "${FERRY_SKIP_BENCH:-0}" = 1 ] || [[ " $BENCHES " != *" net "* ]]; then
  skip bench_net "FERRY_SKIP_BENCH=1 or not in FERRY_BENCHES"
elif [ "$BUILT" -ne 1 ] || [ "$GPUS" -lt 1 ]; then
  skip bench_net "build failed or no GPU"
else
  # shellcheck disable=SC2016  # expanded by the inner bash
  # An entry TLS/zcopy runs with FERRY_UCX_PEER_FAILURE=0 (NOTE [Peer-failure handling and tcp]).
  run_stage bench_net "${TO[@]}" bash -c 'rc=0; for entry in ${FERRY_NET_TLS:-tcp,self tcp,self/zcopy sm,self all}; do
      tls="${entry%/*}"; name="${tls%%,*}"; extra=(); [ "$tls" != all ] && extra=(-x UCX_TLS="$tls")
      [ "$entry" != "$tls" ] && { extra+=(-x FERRY_UCX_PEER_FAILURE=0); name="${name}_${entry##*/}"; }
      "$@" -np 2 -x FERRY_TEST_SHARE_GPUS=1 -x FERRY_RANKS_PER_NODE=1 "${extra[@]}" "$BENCH" net --memory both         --csv "$CSV_DIR/net_$name.csv" || rc=1
    done; exit $rc' bench_net "${MPIRUN[@]}"
fi
# opt_in_bench STAGE WORD HAVE NEED: true when FERRY_BENCHES names WORD, the build
# succeeded and HAVE >= NEED (ranks or GPUs); else records why the stage is skipped.
opt_in_bench() {
  if [ "${FERRY_SKIP_BENCH:-0}" = 1 ]; then skip "$1" "FERRY_SKIP_BENCH=1"; return 1; fi
  if [[ " ${FERRY_BENCHES:-} " != *" $2 "* ]]; then skip "$1" "not in FERRY_BENCHES"; return 1; fi
  if [ "$BUILT" -ne 1 ] || [ "$3" -lt "$4" ]; then skip "$1" "build failed or too few GPUs (needs $4)"; return 1; fi
  return 0
}
if opt_in_bench bench_tune tune "$NBENCH" 1; then
  read -r -a tune_args <<<"${FERRY_TUNE_ARGS:-}"
  run_stage bench_tune env FERRY_NP="$NBENCH" BUILD_DIR="$B" OUT="$OUT" scripts/tune_ep.sh "${tune_args[@]}"
fi
if opt_in_bench bench_crossnode crossnode "$GPUS" 2; then
  run_stage bench_crossnode env BUILD_DIR="$B" OUT="$OUT/crossnode" scripts/device_crossnode.sh
fi

# ---------------------------------------------------------------- Python layer
PY_STAGES_OK=1
if [ "$BUILT" -ne 1 ] || [ ! -d "$B/python/ferry" ] || [ "${FERRY_SKIP_PYTHON:-0}" = 1 ]; then PY_STAGES_OK=0; fi
TORCHRUN=(python3 -m torch.distributed.run --standalone)
export PYTHONPATH="$B_ABS/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "$PY_STAGES_OK" -ne 1 ]; then
  skip python_cpu "no Python module in $B"
elif [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then
  skip python_cpu "FERRY_SKIP_TESTS=1"
else
  run_stage python_cpu "${TO[@]}" python3 -m pytest -q -p no:cacheprovider tests/python/test_cpu_validation.py \
    tests/python/test_cpu_allreduce_args.py tests/python/test_cpu_own_rows_first.py tests/python/test_cpu_zero_copy_combine.py
fi
for n in ${FERRY_PY_NPS:-${NPS[*]}}; do
  # More ranks than GPUs (up to 8) only with virtual ranks: FERRY_TEST_SHARE_GPUS,
  # exported above, makes the tests share GPUs and use gloo instead of NCCL.
  [ "$n" -ge 2 ] && { [ "$n" -le "$GPUS" ] || { [ "$VIRTUAL" = 1 ] && [ "$GPUS" -ge 1 ] && [ "$n" -le 8 ]; }; } || continue
  if [ "$PY_STAGES_OK" -ne 1 ] || [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip "python_np$n" "skipped"; continue; fi
  run_stage "python_np$n" "${TO[@]}" "${TORCHRUN[@]}" --nproc-per-node "$n" -m pytest -q -p no:cacheprovider tests/python
done
if [ "$PY_STAGES_OK" -ne 1 ] || [ "$NBENCH" -lt 2 ] || [ "${FERRY_SKIP_TESTS:-0}" = 1 ]; then skip python_mpi "skipped"
else run_stage python_mpi "${TO[@]}" "${MPIRUN[@]}" -np "$NBENCH" -x PYTHONPATH -x PYTHONUNBUFFERED \
  python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_mpi_init.py; fi
if [ "$PY_STAGES_OK" -ne 1 ] || [ "$NBENCH" -lt 1 ]; then skip example_py "no module or no GPU"
else
  run_stage example_py "${TO[@]}" bash -c 'for mode in high_throughput low_latency; do
      python3 -m torch.distributed.run --standalone --nproc-per-node "$1" examples/moe_layer.py --mode "$mode" || exit
    done' example_py "$NBENCH"
fi
# Across 2 virtual nodes (2 ranks sharing GPU 0, each its own node: EP and
# AllReduce through UCX; kernels loaded eagerly, as torch's are lazy): the Python
# GPU tests and the MoE example (gloo), when FERRY_NODES_PY=1.
if [ "${FERRY_NODES_PY:-0}" != 1 ]; then skip python_nodes "set FERRY_NODES_PY=1"
elif [ "$PY_STAGES_OK" -ne 1 ] || [ "$GPUS" -lt 1 ]; then skip python_nodes "no module or no GPU"
else
  run_stage python_nodes "${TO[@]}" env FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 CUDA_MODULE_LOADING=EAGER \
    bash -c '"$@" --nproc-per-node 2 -m pytest -q -p no:cacheprovider tests/python || exit
      for mode in high_throughput low_latency; do "$@" --nproc-per-node 2 examples/moe_layer.py --mode "$mode" || exit; done' \
    python_nodes "${TORCHRUN[@]}"
fi
read -r -a py_bench_args <<<"${FERRY_PY_BENCH_ARGS:-}"
if [ "$PY_STAGES_OK" -ne 1 ] || [ "$NBENCH" -lt 1 ] || [ "${FERRY_SKIP_BENCH:-0}" = 1 ] ||
   [[ " $BENCHES " != *" torch "* ]]; then skip bench_py "skipped"
else run_stage bench_py "${TO[@]}" "${TORCHRUN[@]}" --nproc-per-node "$NBENCH" bench/python/ferry_torch_bench.py --out "$OUT" "${py_bench_args[@]}"; fi
# The NCCL drop-in (issue 25): its GPU test with the shim on and off, the PyTorch test under LD_PRELOAD, its
# cost per call and nccl-tests' all_reduce_perf with and without it (.deps/nccl-tests), 2 GPUs, one rank each.
if [ "$GPUS" -lt 2 ] || [ "${FERRY_SKIP_NCCL_SHIM:-0}" = 1 ]; then skip nccl_shim "needs 2 GPUs (or FERRY_SKIP_NCCL_SHIM=1)"
else run_stage nccl_shim "${TO[@]}" env OUT="$OUT/nccl_shim" BUILD_DIR="$B" scripts/device_nccl_shim.sh; fi
if [ -n "$PIP_PID" ]; then
  wait "$PIP_PID"
  read -r _ result secs < <(grep '^PIP_RESULT' "$OUT/pip.log" || echo "PIP_RESULT FAIL 0")
  record pip "$result" "$secs" "(log: $OUT/pip.log)"
else
  skip pip "FERRY_SKIP_PIP=1 or build failed"
fi

# ---------------------------------------------------------------- summary (last)
echo
echo "================ ferry device run: $GPUS GPUs, N = ${NPS[*]:-none}, logs in $OUT"
cat "$SUMMARY"
# Each bench's own table: the last ${FERRY_BENCH_TAIL:-60} lines of its log, without MPI noise.
for pair in bench:allreduce bench_ep:ep bench_nvlink:nvlink bench_net:net bench_nodes:nodes bench_tune:tune \
            bench_crossnode:crossnode/crossnode_table bench_py:torch_bench; do
  log="$OUT/${pair%%:*}.log" csv="$OUT/${pair#*:}.csv"
  [ -s "$log" ] || continue
  echo "---------------- ferry-bench ${pair#*:} (end of $log)"
  grep -v -E '^\$ |^--------------------------------------------------------------------------$' "$log" |
    tail -n "${FERRY_BENCH_TAIL:-60}"
  if [ -s "$csv" ]; then echo "(csv: $csv)"; fi
done
if [ "$ANY_FAILED" -ne 0 ]; then
  echo "device_run: FAILED ($(grep -c ' FAIL ' "$SUMMARY") stages)"
  exit 1
fi
echo "device_run: PASSED"
exit 0
