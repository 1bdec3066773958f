// ferry-bench pcie-peer: how fast a GPU reads host memory that ANOTHER rank's GPU has just written, against memory
// its own GPU has just written: the path of a cross-node box over UCX shared memory (NOTE [Mapped peers]), where the
// sender's SMs store into the receiver's landing and the receiver's SMs load it. `ferry-bench pcie` reads host memory
// nobody wrote since; this tells whether the state a peer's writes leave the lines in (caches, coherence) slows the
// receive, or its kernel's shape does (session 48: the low-latency receive over shared memory reads ~21 GB/s, the
// probe 50).
//
// Each rank makes a shared segment (shm_open, mmap, cudaHostRegister: a landing) and maps the next rank's. Per SM
// count and round: every GPU stores `--bytes` into a segment with all its SMs (own: its own segment; peer: the next
// rank's), the ranks synchronize and meet, then each GPU loads its own segment into GPU memory with `--sms` blocks,
// timed by events (the launch's few microseconds included; median of the rounds, max over ranks); the loaded words
// are checked against the writer's. own_load_alone times the same load with the ranks taking turns: against
// own_then_load (all at once, as the ranks' receives run) it says whether the host's GPUs share its bandwidth
// (session 49: on one GPU the receive reads at the link's rate; the ~21 GB/s is a 2-GPU effect).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "host_pattern.cuh"
#include "host_segment.hpp"
#include "row_copy.cuh"

namespace ferry::bench {
namespace {

constexpr int kRounds = 15;

// `items` items of `item_bytes` from src to dst, spread over the grid's warps.
__global__ void peer_copy_kernel(const uint8_t* src, uint8_t* dst, int items, int item_bytes) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int i = int(blockIdx.x) * warps + (threadIdx.x >> 5); i < items; i += int(gridDim.x) * warps) {
    uint8_t* row = dst + size_t(i) * item_bytes;
    warp_copy(src + size_t(i) * item_bytes, &row, 1, item_bytes, lane);
  }
}

}  // namespace

void print_pcie_peer_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np N ferry-bench pcie-peer [--sms 4,8,...] [--bytes 32M] [--item-bytes 14336]\n"
               "                                          [--threads 1024] [--csv FILE]   (ranks of one host)\n"
               "GB/s per GPU of SM loads from a shared host segment just written by this GPU (own_then_load) or by\n"
               "the previous rank's GPU (peer_then_load), every rank loading at once, and own_load_alone: the ranks\n"
               "loading one at a time (whether the GPUs of the host share its bandwidth): a cross-node box over UCX\n"
               "shared memory.\n");
}

int run_pcie_peer_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const CopyProbeOptions o = parse_copy_probe_options(std::move(args));
  if (o.registered_host) throw UsageError("its segments are always registered shared pages");
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  require_one_node(comm, 1, 1 << 20);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int W = comm.size(), me = comm.rank(), previous = (me + W - 1) % W;
  const int items = int(o.bytes / o.item_bytes);
  const size_t bytes = size_t(items) * o.item_bytes, words = bytes / 4;

  const SegmentRing segments(*bootstrap, "pcie-peer", bytes);
  uint8_t* const own = segments.own();
  uint8_t* const next_landing = segments.next();

  // Written over before each timed load, so no line of the stores is still in this GPU's L2.
  int l2_bytes = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, comm.device()));
  DeviceBuffer source(bytes), loaded(bytes), mismatches(sizeof(unsigned long long)), l2_flush(2 * size_t(l2_bytes));
  host_fill_kernel<<<132, 1024>>>(static_cast<uint32_t*>(source.get()), words, me + 1);
  FERRY_CUDA_CHECK(cudaGetLastError());
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  CudaStream stream;
  EventList events(2);
  const cudaStream_t s = stream.get();

  if (leader) {
    std::printf("ferry-bench pcie-peer: %d ranks of one host, %s in %d-byte items, %d threads per block\n", W,
                format_byte_size(bytes).c_str(), o.item_bytes, o.threads);
    std::printf("  GB/s per GPU of the loads (median of %d rounds, max time over ranks); '!' failed check\n", kRounds);
  }
  CopyProbeTable table(leader, o);
  // own_load_alone: the ranks take turns at the timed load (the others wait at a barrier).
  struct Row {
    const char* method;
    bool from_peer, alone;
  };
  for (const auto& [method, from_peer, alone] :
       {Row{"own_then_load", false, false}, Row{"peer_then_load", true, false}, Row{"own_load_alone", false, true}}) {
    table.begin_row(method);
    for (int sms : o.sms) {
      const int blocks = std::max(1, std::min(sms, comm.num_sms()));
      std::vector<double> us;
      for (int round = 0; round < kRounds; ++round) {
        FERRY_CUDA_CHECK(cudaMemsetAsync(loaded.get(), 0xEE, bytes, s));
        peer_copy_kernel<<<comm.num_sms(), o.threads, 0, s>>>(static_cast<const uint8_t*>(source.get()),
                                                               from_peer ? next_landing : own, items,
                                                               o.item_bytes);
        FERRY_CUDA_CHECK(cudaGetLastError());
        FERRY_CUDA_CHECK(cudaMemsetAsync(l2_flush.get(), round, l2_flush.bytes(), s));
        FERRY_CUDA_CHECK(cudaStreamSynchronize(s));
        bootstrap->barrier();  // every landing written
        for (int turn = 0; turn < (alone ? W : 1); ++turn) {
          if (!alone || turn == me) {
            FERRY_CUDA_CHECK(cudaEventRecord(events.events[0], s));
            peer_copy_kernel<<<blocks, o.threads, 0, s>>>(own, static_cast<uint8_t*>(loaded.get()), items,
                                                           o.item_bytes);
            FERRY_CUDA_CHECK(cudaEventRecord(events.events[1], s));
            FERRY_CUDA_CHECK(cudaEventSynchronize(events.events[1]));
            float ms = 0;
            FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.events[0], events.events[1]));
            us.push_back(double(ms) * 1000.0);
          }
          bootstrap->barrier();  // every load (this turn's) done before the next turn or round
        }
      }
      FERRY_CUDA_CHECK(cudaMemsetAsync(mismatches.get(), 0, sizeof(unsigned long long), s));
      host_check_kernel<<<132, 1024, 0, s>>>(static_cast<const uint32_t*>(loaded.get()), words,
                                             (from_peer ? previous : me) + 1,
                                             static_cast<unsigned long long*>(mismatches.get()));
      FERRY_CUDA_CHECK(cudaGetLastError());
      const bool ok = no_mismatches_on_any_rank(*bootstrap, mismatches, s);
      const double op_us = max_over_ranks(*bootstrap, median(us));
      table.cell(method, blocks, op_us, double(bytes) / 1e9 / (op_us * 1e-6), ok);
    }
    table.end_row();
  }
  return 0;
}

}  // namespace ferry::bench
