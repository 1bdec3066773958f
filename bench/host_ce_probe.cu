// ferry-bench pcie-ce: how long a low-latency box takes from one GPU's memory to the next rank's GPU memory of the
// same host when copy engines move it through host memory, with no SM on the path (docs/internode.md, session 50:
// copy engines end to end, an option for the low-latency dispatch over UCX shared memory, where SM stores queue
// behind each other and a receive's loads and fences wait behind them).
//
// Each rank makes a shared segment (host_segment.hpp: a landing) and maps the next rank's. Per round, every rank at
// once, the box cut in P pieces:
//   stream A: meet the previous and next ranks (a flag each way, so the ranks start together), start event; then per
//             piece k: copy piece k device -> the next rank's landing, cuStreamWriteValue64(its flag k, round) (the
//             write waits for the copy: the default flags' memory barrier);
//   stream B: (after the start event) per piece k: cuStreamWaitValue64(own flag k >= round), copy piece k own
//             landing -> device; end event.
// Time: start to end, median of the rounds, max over ranks; the landed bytes are checked against the previous
// rank's. The rows: P = each of --pieces. GB/s: box bytes / time (each direction carries one box at once).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "host_pattern.cuh"
#include "host_segment.hpp"
#include "stream_memops.hpp"

namespace ferry::bench {
namespace {

constexpr int kRounds = 21;
constexpr int kMaxPieces = 64;
constexpr size_t kFlagsBytes = 4096;  // after the box in each segment: [kMaxPieces] piece flags, then the meet flag

struct Options {
  size_t bytes = size_t(1) << 20;
  std::vector<int> pieces = {1, 2, 4, 8};
};

Options parse_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options o;
  if (auto v = parser.take_value("--bytes")) o.bytes = parse_byte_size(*v);
  if (auto v = parser.take_value("--pieces")) {
    o.pieces.clear();
    for (const std::string& p : split_list(*v)) o.pieces.push_back(parse_positive_int("--pieces", p));
  }
  parser.finish();
  if (o.bytes < 16 || o.bytes % 16 != 0) throw UsageError("--bytes must be a multiple of 16");
  for (int p : o.pieces)
    if (p > kMaxPieces || size_t(p) * 16 > o.bytes)
      throw UsageError("--pieces takes 1 to " + std::to_string(kMaxPieces) + " pieces of at least 16 bytes");
  return o;
}

}  // namespace

void print_pcie_ce_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np N ferry-bench pcie-ce [--bytes 1M] [--pieces 1,2,4,8]   (ranks of one host)\n"
               "Microseconds for a box of --bytes to go from each GPU's memory to the next rank's GPU memory by copy\n"
               "engines through a shared host segment, in P pieces (each landed piece signalled by a stream write\n"
               "the receiving stream waits for): every rank at once, no SM on the path.\n");
}

int run_pcie_ce_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options o = parse_options(std::move(args));
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  require_one_node(comm, 1, 1 << 20);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const StreamMemOps memops;
  const int W = comm.size(), me = comm.rank(), previous = (me + W - 1) % W;
  const size_t bytes = o.bytes, words = bytes / 4;
  const SegmentRing segments(*bootstrap, "pcie-ce", bytes + kFlagsBytes);
  // Flags: [kMaxPieces] piece flags, then the meet flag, in each segment; every value a round sequence number, so
  // nothing is reset (a segment's flags only grow).
  auto flags = [&](uint8_t* segment) { return reinterpret_cast<uint64_t*>(segment + bytes); };
  std::fill_n(flags(segments.own()), kMaxPieces + 1, uint64_t(0));
  bootstrap->barrier();

  DeviceBuffer source(bytes), landed(bytes), mismatches(sizeof(unsigned long long));
  host_fill_kernel<<<132, 1024>>>(static_cast<uint32_t*>(source.get()), words, me + 1);
  FERRY_CUDA_CHECK(cudaGetLastError());
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  CudaStream stream_a, stream_b;
  const cudaStream_t a = stream_a.get(), b = stream_b.get();
  EventList events(2);

  if (leader) {
    std::printf("ferry-bench pcie-ce: %d ranks of one host, a box of %s to the next rank by copy engines through\n"
                "  host memory (median of %d rounds, max time over ranks; GB/s: box bytes / time); '!' failed check\n",
                W, format_byte_size(bytes).c_str(), kRounds);
    std::printf("%-8s %10s %10s\n", "pieces", "us", "GB/s");
  }
  uint64_t seq = 0;
  for (int pieces : o.pieces) {
    const size_t piece_bytes = (bytes / 16 + pieces - 1) / pieces * 16;
    std::vector<double> us;
    for (int round = 0; round < kRounds; ++round) {
      ++seq;
      FERRY_CUDA_CHECK(cudaMemsetAsync(landed.get(), 0xEE, bytes, a));
      FERRY_CUDA_CHECK(cudaStreamSynchronize(a));
      bootstrap->barrier();  // every rank read its landing of the round before (stream B synchronized below)
      // The meet: tell the next rank this one is here, wait for the previous rank to say the same.
      memops.write(a, flags(segments.next()) + kMaxPieces, seq);
      memops.wait_geq(a, flags(segments.own()) + kMaxPieces, seq);
      FERRY_CUDA_CHECK(cudaEventRecord(events.events[0], a));
      FERRY_CUDA_CHECK(cudaStreamWaitEvent(b, events.events[0], 0));
      for (int k = 0; k < pieces; ++k) {
        const size_t first = std::min(bytes, size_t(k) * piece_bytes), n = std::min(bytes, first + piece_bytes) - first;
        FERRY_CUDA_CHECK(cudaMemcpyAsync(segments.next() + first, static_cast<const uint8_t*>(source.get()) + first, n,
                                         cudaMemcpyDeviceToHost, a));
        memops.write(a, flags(segments.next()) + k, seq);
        memops.wait_geq(b, flags(segments.own()) + k, seq);
        FERRY_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(landed.get()) + first, segments.own() + first, n,
                                         cudaMemcpyHostToDevice, b));
      }
      FERRY_CUDA_CHECK(cudaEventRecord(events.events[1], b));
      FERRY_CUDA_CHECK(cudaStreamSynchronize(a));
      FERRY_CUDA_CHECK(cudaEventSynchronize(events.events[1]));
      float ms = 0;
      FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.events[0], events.events[1]));
      us.push_back(double(ms) * 1000.0);
    }
    FERRY_CUDA_CHECK(cudaMemsetAsync(mismatches.get(), 0, sizeof(unsigned long long), b));
    host_check_kernel<<<132, 1024, 0, b>>>(static_cast<const uint32_t*>(landed.get()), words, previous + 1,
                                           static_cast<unsigned long long*>(mismatches.get()));
    FERRY_CUDA_CHECK(cudaGetLastError());
    const bool ok = no_mismatches_on_any_rank(*bootstrap, mismatches, b);
    const double op_us = max_over_ranks(*bootstrap, median(us));
    if (leader)
      std::printf("%-8d %9.2f%s %10.1f\n", pieces, op_us, ok ? " " : "!", double(bytes) / 1e9 / (op_us * 1e-6));
  }
  return 0;
}

}  // namespace ferry::bench
