// ferry-bench latency: a design probe for the low-latency EP targets of issue 23
// (docs/ep-notes.md: at one token a dispatch takes ~22 us against NCCL's ~13, the
// layout alone ~5.7 us of dependent steps, ~8 us outside the two grids). It times
// the building blocks such a call is made of, each as a CUDA-graph replay of G
// calls, median per call, max over ranks:
//   launch          one empty kernel (1 block): the floor of a graph kernel node
//   launch_x2       two empty kernels one after the other (the EP halves, plainly)
//   launch_x2_pdl   the second as a programmatic dependent launch (as the EP halves are)
//   launch_event    one empty kernel and an external event-record node (ferry-bench ep times each op so)
//   halves_pdl      the EP halves' structure, empty: 44 blocks that let the dependent start, then 88 launched
//                   as their dependent that wait for them at the end; one_grid: one grid of 132 blocks
//   grid_132x1024   an empty grid of the EP halves' shape; grid_smem_switch: two, the second with 40 KB of
//                   dynamic shared memory (the first none); grid_smem_same: both with 40 KB
//   loads_N         one thread, N dependent global loads (pointer chase in L2): the
//                   cost of a chain such as epoch -> ids -> layout
//   fence_sys       every block (132 x 1024) fences at system scope and counts in; the
//                   last block resets the count (the cross-node kernels' last-block arrival)
//   arrive_acq_rel  the same with one acq_rel atomic at GPU scope (the intranode kernels')
//   flag_rtt        a flag round trip over NVLink between ranks 0 and 1 (release store at
//                   the peer, acquire spin here; a device counter gives each call its value)
//   flag_rtt_x4     four round trips in one kernel (the per-trip cost without the launch)
// Every wait goes through the communicator's timeout: one that runs out ends the probe with its report.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "common/dependent_launch.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/sync.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/symmetric_heap.hpp"

namespace ferry::bench {
namespace {

constexpr int kChainLength = 4096;  // slots of the pointer chase (32 KB: stays in L2)
constexpr int kSwitchSmemBytes = 40 << 10;  // about what the EP send kernels take

struct LatencyParams {
  uint64_t* peer_flag;   // the peer's flag word (as mapped here)
  uint64_t* my_flag;     // this rank's flag word, written by the peer
  uint64_t* counter;     // this rank's call counter (device memory)
  unsigned* arrivals;    // last-block count
  const uint32_t* chain; // pointer chase: chain[i] is the next index
  uint32_t* sink;
  WaitContext wait;
  int rank;
  int loads;
  int trips;
};

__global__ void empty_kernel() {}

__global__ void empty_dependent_kernel() { device::wait_prior_grid(); }

// The low-latency EP halves' structure with empty bodies: a send grid that lets its dependent start at
// once, and a receive grid (launched as its dependent) that waits for the send grid's completion at its
// end, as finish_launch does; against one grid of both sizes (halves_pdl vs one_grid).
__global__ void __launch_bounds__(1024, 1) send_half_kernel() { device::allow_dependent_launch(); }
__global__ void __launch_bounds__(1024, 1) recv_half_kernel() { device::wait_prior_grid(); }

// A grid shaped like the low-latency EP halves (132 x 1024), with or without dynamic shared memory
// (the EP send kernels take ~40 KB: a kernel after one that took none may need the SM reconfigured).
__global__ void __launch_bounds__(1024, 1) full_grid_kernel(uint32_t* sink) {
  extern __shared__ uint32_t smem_words[];
  if (threadIdx.x == 0 && sink == nullptr) smem_words[0] = 0;  // never: keeps the dynamic region declared
}

__global__ void loads_kernel(LatencyParams p) {
  uint32_t i = 0;
  for (int n = 0; n < p.loads; ++n) i = __ldcg(p.chain + i);
  *p.sink = i;
}

template <bool kSystemFence>
__global__ void arrive_kernel(LatencyParams p) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned before;
    if constexpr (kSystemFence) {
      __threadfence_system();
      before = atomicAdd(p.arrivals, 1u);
      __threadfence();
    } else {
      asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(p.arrivals) : "memory");
    }
    if (before == gridDim.x - 1) *p.arrivals = 0;
  }
}

// Rank 0 serves, rank 1 answers; values grow with each trip of each call.
__global__ void pingpong_kernel(LatencyParams p) {
  const uint64_t base = *p.counter;
  for (int t = 1; t <= p.trips; ++t) {
    const uint64_t v = base + t;
    if (p.rank == 0) {
      device::st_release_sys(p.peer_flag, v);
      if (!device::wait_flag_geq(p.my_flag, v, p.wait, 1, kPhaseSignalWait)) break;
    } else {
      if (!device::wait_flag_geq(p.my_flag, v, p.wait, 0, kPhaseSignalWait)) break;
      device::st_release_sys(p.peer_flag, v);
    }
  }
  *p.counter = base + p.trips;
}

struct Options {
  int ops_per_graph = 20;
  std::string csv_path;
};

Options parse_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options o;
  if (auto v = parser.take_value("--graph-ops")) o.ops_per_graph = parse_positive_int("--graph-ops", *v);
  if (auto v = parser.take_value("--csv")) o.csv_path = *v;
  parser.finish();
  if (o.ops_per_graph % 2 != 0) throw UsageError("--graph-ops must be even");
  return o;
}

}  // namespace

void print_latency_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np 2 ferry-bench latency [--graph-ops 20] [--csv FILE]\n"
               "Design probe: us per call of the building blocks of a low-latency EP call (graph kernel launches,\n"
               "a dependent launch, dependent loads, last-block arrivals, NVLink flag round trips).\n");
}

int run_latency_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options o = parse_options(std::move(args));
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  require_one_node(comm, 2, 2);
  const int rank = comm.rank(), peer = 1 - rank;

  const SymmetricBuffer flags = comm.heap().allocate(64);
  FERRY_CUDA_CHECK(cudaMemset(flags.peer(rank), 0, 64));
  DeviceBuffer state(64), chain(sizeof(uint32_t) * kChainLength);
  FERRY_CUDA_CHECK(cudaMemset(state.get(), 0, 64));
  // A chase through every slot with a stride that defeats the prefetcher.
  std::vector<uint32_t> next(kChainLength);
  for (int i = 0; i < kChainLength; ++i) next[i] = uint32_t((i + 1297) % kChainLength);
  FERRY_CUDA_CHECK(cudaMemcpy(chain.get(), next.data(), next.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  LatencyParams p{};
  p.peer_flag = static_cast<uint64_t*>(flags.peer(peer));
  p.my_flag = static_cast<uint64_t*>(flags.peer(rank));
  char* base = static_cast<char*>(state.get());
  p.counter = reinterpret_cast<uint64_t*>(base);
  p.arrivals = reinterpret_cast<unsigned*>(base + 8);
  p.sink = reinterpret_cast<uint32_t*>(base + 12);
  p.wait = WaitContext{comm.device_error_state(), comm.device_abort_flag(), comm.timeout_ns(), comm.rank()};
  p.chain = static_cast<const uint32_t*>(chain.get());
  p.rank = rank;
  const bool pdl = supports_dependent_launch(comm.device());
  CudaStream stream;
  EventList marker(1);  // the kind of event ferry-bench ep records between ops (bench_timing.hpp)
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  bootstrap->barrier();

  struct Case {
    std::string name;
    std::function<void(cudaStream_t)> enqueue;
  };
  auto with = [&](auto f) { return std::function<void(cudaStream_t)>(f); };
  std::vector<Case> cases = {
      {"launch", with([&](cudaStream_t s) { empty_kernel<<<1, 32, 0, s>>>(); })},
      {"launch_x2", with([&](cudaStream_t s) {
         empty_kernel<<<1, 32, 0, s>>>();
         empty_kernel<<<1, 32, 0, s>>>();
       })},
      {"launch_x2_pdl", with([&](cudaStream_t s) {
         empty_kernel<<<1, 32, 0, s>>>();
         launch_dependent(empty_dependent_kernel, dim3(1), dim3(32), 0, s, pdl);
       })},
      // What ferry-bench ep puts between two ops: an external event-record node.
      {"launch_event", with([&](cudaStream_t s) {
         empty_kernel<<<1, 32, 0, s>>>();
         // External records are for captures only; the eager first call records plainly.
         cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
         FERRY_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
         FERRY_CUDA_CHECK(capturing == cudaStreamCaptureStatusActive
                              ? cudaEventRecordWithFlags(marker.events[0], s, cudaEventRecordExternal)
                              : cudaEventRecord(marker.events[0], s));
       })},
      {"grid_132x1024", with([&](cudaStream_t s) { full_grid_kernel<<<132, 1024, 0, s>>>(p.sink); })},
      {"grid_smem_switch", with([&](cudaStream_t s) {
         full_grid_kernel<<<132, 1024, 0, s>>>(p.sink);
         full_grid_kernel<<<132, 1024, kSwitchSmemBytes, s>>>(p.sink);
       })},
      {"halves_pdl", with([&](cudaStream_t s) {
         send_half_kernel<<<44, 1024, 0, s>>>();
         launch_dependent(recv_half_kernel, dim3(88), dim3(1024), 0, s, pdl);
       })},
      {"one_grid", with([&](cudaStream_t s) { send_half_kernel<<<132, 1024, 0, s>>>(); })},
      {"grid_smem_same", with([&](cudaStream_t s) {
         full_grid_kernel<<<132, 1024, kSwitchSmemBytes, s>>>(p.sink);
         full_grid_kernel<<<132, 1024, kSwitchSmemBytes, s>>>(p.sink);
       })},
  };
  for (int loads : {1, 4, 16, 64}) {
    cases.push_back({"loads_" + std::to_string(loads), with([&, loads](cudaStream_t s) {
                       LatencyParams q = p;
                       q.loads = loads;
                       loads_kernel<<<1, 1, 0, s>>>(q);
                     })});
  }
  cases.push_back({"fence_sys", with([&](cudaStream_t s) { arrive_kernel<true><<<132, 1024, 0, s>>>(p); })});
  cases.push_back({"arrive_acq_rel", with([&](cudaStream_t s) { arrive_kernel<false><<<132, 1024, 0, s>>>(p); })});
  for (int trips : {1, 4}) {
    cases.push_back({trips == 1 ? "flag_rtt" : "flag_rtt_x4", with([&, trips](cudaStream_t s) {
                       LatencyParams q = p;
                       q.trips = trips;
                       pingpong_kernel<<<1, 1, 0, s>>>(q);
                     })});
  }

  if (leader)
    std::printf("ferry-bench latency: 2 ranks, us per call (median of graph replays of %d calls, max over ranks)\n\n",
                o.ops_per_graph);
  std::optional<CsvWriter> csv;
  if (leader && !o.csv_path.empty()) csv.emplace(o.csv_path, std::vector<std::string>{"case", "us"});
  // A wait that ran out is the communicator's error: synchronize throws it, naming rank, peer and phase.
  auto synchronize = [&](cudaStream_t s) { comm.synchronize(s); };
  TimingOptions timing;
  timing.ops_per_graph = o.ops_per_graph;
  for (const Case& c : cases) {
    c.enqueue(stream.get());  // once eagerly: module loading, and the flags' first values
    synchronize(stream.get());
    const TimingResult t = time_op({c.name, c.enqueue, synchronize}, stream.get(), *bootstrap, timing);
    if (leader) std::printf("  %-16s %8.2f\n", c.name.c_str(), t.op_us);
    if (csv) csv->write_row({c.name, format_fixed(t.op_us, 3)});
    std::fflush(stdout);
  }
  comm.heap().release(flags);
  return 0;
}

}  // namespace ferry::bench
