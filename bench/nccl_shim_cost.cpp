// ferry-nccl-shim-cost: what libferry_nccl.so adds per ncclAllReduce call, in
// microseconds, against calling ferry's AllReduce directly (include/ferry/), with
// the real NCCL beside both. Run with one rank per GPU:
//
//   mpirun -np 2 ferry-nccl-shim-cost [--dtype bf16|fp32] [--iters N] [--graph-ops G]
//
// Three contenders, in one process, on the same buffers and stream:
//   shim    ncclAllReduce through the shim (ferry's path when FERRY_NCCL_SHIM is on)
//   direct  ferry::AllReduce::run on a Communicator of its own (MpiBootstrap)
//   nccl    the real NCCL, loaded with dlopen (FERRY_NCCL_LIBRARY, else the
//           build-time NCCL) and called through its own symbols, on its own communicator
// Each is timed eagerly (N calls back to back between two events; the host's
// time to enqueue them too) and in a CUDA graph of G calls (replay time / G).
// Times are medians over repetitions, max over ranks. The eager difference is
// the shim's host cost where calls are launch-bound; in a graph the shim runs
// nothing per replay, so its difference there should be noise.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/knobs.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/error.hpp"
#include "ferry_nccl_ext.h"

#ifndef FERRY_NCCL_DEFAULT_LIBRARY
#define FERRY_NCCL_DEFAULT_LIBRARY "libnccl.so.2"
#endif

namespace {

#define CHECK_CUDA(x)                                                                                \
  do {                                                                                               \
    const cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)
#define CHECK_NCCL(x)                                                                                  \
  do {                                                                                                 \
    const ncclResult_t r_ = (x);                                                                       \
    if (r_ != ncclSuccess) throw std::runtime_error(std::string(#x) + " failed: " + std::to_string(r_)); \
  } while (0)

// The real NCCL's own entry points (not the shim's, which this program links).
struct RealNccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetVersion) get_version = nullptr;
};

RealNccl load_real_nccl() {
  const std::string path = ferry::knobs::kNcclLibrary.read().value_or(FERRY_NCCL_DEFAULT_LIBRARY);
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
  RealNccl r;
  r.get_unique_id = reinterpret_cast<decltype(r.get_unique_id)>(dlsym(h, "ncclGetUniqueId"));
  r.init_rank = reinterpret_cast<decltype(r.init_rank)>(dlsym(h, "ncclCommInitRank"));
  r.all_reduce = reinterpret_cast<decltype(r.all_reduce)>(dlsym(h, "ncclAllReduce"));
  r.destroy = reinterpret_cast<decltype(r.destroy)>(dlsym(h, "ncclCommDestroy"));
  r.get_version = reinterpret_cast<decltype(r.get_version)>(dlsym(h, "ncclGetVersion"));
  if (!r.get_unique_id || !r.init_rank || !r.all_reduce || !r.destroy || !r.get_version)
    throw std::runtime_error(path + " lacks an NCCL entry point");
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double max_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

struct Times {
  double eager_us = 0;  // GPU time per call, N calls back to back
  double host_us = 0;   // host time to enqueue one call
  double graph_us = 0;  // per call inside a graph replay
};

using Enqueue = std::function<void(cudaStream_t)>;

Times time_contender(const Enqueue& call, cudaStream_t stream, int iters, int graph_ops, int reps) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 20; ++i) call(stream);  // warm-up (first-call set-up, caches)
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> eager, host, graph;
  for (int rep = 0; rep < reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);  // ranks start together: no one waits on a late peer inside the timing
    CHECK_CUDA(cudaEventRecord(start, stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call(stream);
    const auto t1 = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    eager.push_back(ms * 1e3 / iters);
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < graph_ops; ++i) call(stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &g));
  CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int rep = 0; rep < reps * 2; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    graph.push_back(ms * 1e3 / graph_ops);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return {max_over_ranks(median(eager)), max_over_ranks(median(host)), max_over_ranks(median(graph))};
}

int run(int argc, char** argv, int rank, int size) {
  std::string dtype = "bf16";
  int iters = 200, graph_ops = 50, reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--dtype") dtype = argv[i + 1];
    else if (a == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--graph-ops") graph_ops = std::max(1, std::atoi(argv[i + 1]));
    else throw std::runtime_error("unknown option " + a + " (--dtype bf16|fp32, --iters N, --graph-ops G)");
  }
  const bool bf16 = dtype == "bf16";
  if (!bf16 && dtype != "fp32") throw std::runtime_error("--dtype must be bf16 or fp32");
  const size_t elem = bf16 ? 2 : 4;
  const ncclDataType_t nccl_type = bf16 ? ncclBfloat16 : ncclFloat32;
  const ferry::DataType ferry_type = bf16 ? ferry::DataType::kBFloat16 : ferry::DataType::kFloat32;

  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < size) {
    if (rank == 0) std::printf("ferry-nccl-shim-cost: needs one GPU per rank (%d GPU(s), %d ranks)\n", gpus, size);
    return 1;
  }
  CHECK_CUDA(cudaSetDevice(rank % gpus));
  const std::vector<size_t> sizes = {8, 64, 512, 4096, 32768, 262144, 1048576};
  const size_t max_bytes = sizes.back();

  // shim: ncclCommInitRank through libferry_nccl.so (ferry set up inside when on).
  ncclUniqueId id{};
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t shim = nullptr;
  CHECK_NCCL(ncclCommInitRank(&shim, size, id, rank));
  ferryNcclShimStats_t before{};
  CHECK_NCCL(ferryNcclShimStats(shim, &before));

  // nccl: the real library's own communicator.
  const RealNccl real = load_real_nccl();
  ncclUniqueId real_id{};
  if (rank == 0) CHECK_NCCL(real.get_unique_id(&real_id));
  MPI_Bcast(&real_id, sizeof(real_id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t nccl = nullptr;
  CHECK_NCCL(real.init_rank(&nccl, size, real_id, rank));

  // direct: ferry's public API.
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  ferry::Communicator comm(bootstrap);
  ferry::AllReduce allreduce(comm, max_bytes);

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* in = nullptr;
  void* out = nullptr;
  CHECK_CUDA(cudaMalloc(&in, max_bytes));
  CHECK_CUDA(cudaMalloc(&out, max_bytes));
  CHECK_CUDA(cudaMemset(in, 0, max_bytes));  // zeros: a sum of zeros stays finite in every replay

  int version = 0;
  real.get_version(&version);
  if (rank == 0) {
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, rank % gpus));
    std::printf("ferry-nccl-shim-cost: %d ranks, %s, NCCL %d, %s sum, out of place; FERRY_NCCL_SHIM=%s%s%s\n", size,
                prop.name, version, dtype.c_str(), before.ferry_serves ? "on" : "off/unused",
                before.ferry_serves ? "" : ": ", before.no_ferry);
    std::printf("  eager: %d calls back to back, GPU time / call (host enqueue time / call); graph: %d calls per "
                "graph, replay / %d; median of %d, max over ranks; us\n\n",
                iters, graph_ops, graph_ops, reps);
    std::printf("%8s | %8s %8s %8s %9s | %7s %7s %7s %9s | %8s %8s %8s %9s\n", "bytes", "shim", "direct", "nccl",
                "shim-dir", "h.shim", "h.dir", "h.nccl", "h.sh-dir", "g.shim", "g.direct", "g.nccl", "g.sh-dir");
  }
  for (size_t bytes : sizes) {
    const size_t count = bytes / elem;
    const Times t_shim = time_contender(
        [&](cudaStream_t s) { CHECK_NCCL(ncclAllReduce(in, out, count, nccl_type, ncclSum, shim, s)); }, stream, iters,
        graph_ops, reps);
    const Times t_direct = time_contender(
        [&](cudaStream_t s) { allreduce.run(in, out, count, ferry_type, ferry::ReduceOp::kSum, s); }, stream, iters,
        graph_ops, reps);
    const Times t_nccl = time_contender(
        [&](cudaStream_t s) { CHECK_NCCL(real.all_reduce(in, out, count, nccl_type, ncclSum, nccl, s)); }, stream,
        iters, graph_ops, reps);
    comm.synchronize(stream);  // surfaces a ferry device timeout, if any
    if (rank == 0)
      std::printf("%8zu | %8.2f %8.2f %8.2f %+9.2f | %7.2f %7.2f %7.2f %+9.2f | %8.2f %8.2f %8.2f %+9.2f\n", bytes,
                  t_shim.eager_us, t_direct.eager_us, t_nccl.eager_us, t_shim.eager_us - t_direct.eager_us,
                  t_shim.host_us, t_direct.host_us, t_nccl.host_us, t_shim.host_us - t_direct.host_us, t_shim.graph_us,
                  t_direct.graph_us, t_nccl.graph_us, t_shim.graph_us - t_direct.graph_us);
  }
  ferryNcclShimStats_t after{};
  CHECK_NCCL(ferryNcclShimStats(shim, &after));
  if (rank == 0)
    std::printf("\nshim routes: ferry %llu calls, NCCL %llu%s\n", after.allreduce_ferry - before.allreduce_ferry,
                after.allreduce_forwarded - before.allreduce_forwarded,
                after.allreduce_forwarded > before.allreduce_forwarded ? " (the shim column is partly NCCL)" : "");
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(stream);
  real.destroy(nccl);
  ncclCommDestroy(shim);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 1;
  try {
    rc = run(argc, argv, rank, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-nccl-shim-cost (rank %d): %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
