// ferry-bench ce-allreduce: a design probe for issue 23's AllReduce at 2-32 MB on
// two ranks (docs/allreduce-notes.md, session 14). ferry's pipelined one-shot
// spends ~9.8 us of a 4 MB call in fixed cost and streams at ~338 GB/s with SM
// stores; the copy engine moves 369 GB/s without SMs (ferry-bench nvlink). Here
// each rank's copy engine pushes its input into the peer's scratch in chunks, a
// stream memory operation raises one flag per chunk at the peer after the
// chunk's copy (cuStreamWriteValue64, with its default memory barrier), and a
// reduce kernel on the caller's stream sums each chunk as its flag arrives:
//
//   caller's stream:  [fork] reduce kernel (waits per chunk, sums mine + landed) [join]
//   side stream:      [wait fork] copy chunk 0, flag 0, copy chunk 1, flag 1, ... [record join]
//
// NOTE [CE probe buffer reuse]: calls alternate between two parities of scratch
// and flags (the call count on the host; captured graphs hold an even number of
// calls, so replays keep alternating). The reduce kernel's last block clears this
// parity's flags. The peer writes parity p again two calls later, after its own
// reduce of the call between, which waited for this rank's flags of that call,
// which this rank's side stream raised after its fork, which comes after this
// rank's reduce of parity p (clears included) on the caller's stream.
// A library call cannot count on that: a graph may hold one call, so every replay
// writes the same buffer. The "+hs" variant is that protocol: one buffer, and
// the reduce kernel's last block, after clearing its flags, tells the peer it has
// read its scratch and waits for the peer to say the same (one more flag round
// trip per call, at the kernel's end), so no call copies into a scratch the
// peer is still reading.
//
// Times: median of CUDA-graph replays, max over ranks, beside ferry's AllReduce
// (auto) in the same process; every case's output is checked against the sum of
// both ranks' inputs (bitwise; the two-term fp32 sum does not depend on order).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "allreduce/allreduce_device.cuh"
#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/symmetric_heap.hpp"
#include "stream_memops.hpp"

namespace ferry::bench {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxChunks = 64;
constexpr size_t kPackBytes = allreduce::kPackBytes;  // 8 bf16

struct ProbeParams {
  const uint4* in;       // this rank's input
  uint4* out;
  const uint4* landed;   // this rank's scratch of this parity: the peer's input, copied by the peer
  uint64_t* flags;       // this rank's flags of this parity, [chunks]: nonzero once the peer's chunk landed
  uint64_t* peer_consumed;  // +hs: the peer's "may write" word (as mapped here); nullptr: parity variant
  uint64_t* consumed;       // +hs: this rank's word, raised by the peer once it read its scratch
  unsigned* blocks_done;
  WaitContext wait;       // the communicator's timeout: a lost flag fails the case instead of hanging
  int rank;
  size_t packs;
  size_t chunk_packs;
  int chunks;
};

// The library's reduction, so the probe sums exactly as ferry's kernels do (rank order, fp32).
__device__ __forceinline__ uint4 sum_in_rank_order(int rank, uint4 mine, uint4 theirs) {
  uint4 raw[allreduce::kMaxNodeRanks];
  raw[0] = rank == 0 ? mine : theirs;
  raw[1] = rank == 0 ? theirs : mine;
  return allreduce::reduce_in_rank_order<__nv_bfloat16, ReduceOp::kSum>(raw, 2);
}

__global__ void __launch_bounds__(kThreads) ce_reduce_kernel(ProbeParams p) {
  __shared__ int ok;
  __shared__ bool last;
  const size_t begin = p.packs * blockIdx.x / gridDim.x, end = p.packs * (blockIdx.x + 1) / gridDim.x;
  for (size_t from = begin; from < end;) {
    const size_t chunk = from / p.chunk_packs;
    const size_t to = min(end, (chunk + 1) * p.chunk_packs);
    if (threadIdx.x == 0) ok = device::wait_flag_geq(p.flags + chunk, 1, p.wait, 1 - p.rank, kPhaseOneShotExchange);
    __syncthreads();  // thread 0's acquire, then every thread's loads of the landed chunk
    if (!ok) break;
    for (size_t i = from + threadIdx.x; i < to; i += kThreads) p.out[i] = sum_in_rank_order(p.rank, p.in[i], p.landed[i]);
    from = to;
    __syncthreads();  // every thread read `ok` before thread 0 rewrites it
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(p.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {  // NOTE [CE probe buffer reuse]
    for (int c = threadIdx.x; c < p.chunks; c += kThreads) p.flags[c] = 0;
    if (p.peer_consumed != nullptr) {
      __syncthreads();  // the clears before the release that lets the peer write them again
      if (threadIdx.x == 0) {
        device::st_release_sys(p.peer_consumed, 1);
        if (device::wait_flag_geq(p.consumed, 1, p.wait, 1 - p.rank, kPhaseOneShotExchange))
          *p.consumed = 0;  // the peer raises it again only after this rank's next copies
      }
    }
    if (threadIdx.x == 0) *p.blocks_done = 0;
  }
}

__device__ __forceinline__ __nv_bfloat16 input_value(int rank, size_t element) {
  const uint32_t h = uint32_t(element * 2654435761u) ^ uint32_t(rank * 40503u + 17u);
  return __float2bfloat16(float(int(h % 2001u) - 1000) / 37.f);
}

__global__ void fill_kernel(__nv_bfloat16* in, size_t count, int rank) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    in[i] = input_value(rank, i);
}

__global__ void check_kernel(const __nv_bfloat16* out, size_t count, unsigned long long* mismatches) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const __nv_bfloat16 want = __float2bfloat16(__bfloat162float(input_value(0, i)) + __bfloat162float(input_value(1, i)));
    if (__bfloat16_as_ushort(out[i]) != __bfloat16_as_ushort(want)) atomicAdd(mismatches, 1ull);
  }
}

struct Options {
  std::vector<size_t> sizes = {size_t(2) << 20, size_t(4) << 20, size_t(8) << 20, size_t(16) << 20, size_t(32) << 20};
  std::vector<int> chunks = {1, 2, 4, 8, 16};
  int blocks = 132;
  std::string csv_path;
};

Options parse_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options o;
  if (auto v = parser.take_value("--sizes")) {
    o.sizes.clear();
    for (const std::string& s : split_list(*v)) o.sizes.push_back(parse_byte_size(s));
  }
  if (auto v = parser.take_value("--chunks")) {
    o.chunks.clear();
    for (const std::string& s : split_list(*v)) o.chunks.push_back(parse_positive_int("--chunks", s));
  }
  if (auto v = parser.take_value("--blocks")) o.blocks = parse_positive_int("--blocks", *v);
  if (auto v = parser.take_value("--csv")) o.csv_path = *v;
  parser.finish();
  for (size_t s : o.sizes)
    if (s == 0 || s % kPackBytes != 0) throw UsageError("--sizes: each a positive multiple of 16 bytes");
  for (int c : o.chunks)
    if (c > kMaxChunks) throw UsageError("--chunks: at most " + std::to_string(kMaxChunks));
  return o;
}

}  // namespace

void print_ce_allreduce_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np 2 ferry-bench ce-allreduce [--sizes 2M,4M,...] [--chunks 1,2,4,...] [--blocks 132]\n"
               "                                             [--csv FILE]\n"
               "Design probe: a bf16 sum AllReduce of two ranks in one node whose data moves by copy engine in\n"
               "chunks (one stream-written flag per chunk) while a reduce kernel sums the chunks as they land,\n"
               "beside ferry's AllReduce in the same process; outputs checked.\n");
}

int run_ce_allreduce_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options o = parse_options(std::move(args));
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  require_one_node(comm, 2, 2);
  const int rank = comm.rank(), peer = 1 - rank;
  const StreamMemOps memops;

  const size_t max_bytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  const SymmetricBuffer scratch = comm.heap().allocate(2 * max_bytes);
  // [2 parities][kMaxChunks] chunk flags, then the +hs variant's "consumed" word
  const size_t flag_words = 2 * kMaxChunks + 1;
  const SymmetricBuffer flags = comm.heap().allocate(flag_words * sizeof(uint64_t));
  FERRY_CUDA_CHECK(cudaMemset(flags.peer(rank), 0, flag_words * sizeof(uint64_t)));
  DeviceBuffer input(max_bytes), output(max_bytes), counters(2 * sizeof(unsigned)), mismatches(sizeof(unsigned long long));
  FERRY_CUDA_CHECK(cudaMemset(counters.get(), 0, 2 * sizeof(unsigned)));
  unsigned* blocks_done = static_cast<unsigned*>(counters.get());
  const WaitContext wait{comm.device_error_state(), comm.device_abort_flag(), comm.timeout_ns(), comm.rank()};
  CudaStream stream, side;
  const EventList fork_join(2, cudaEventDisableTiming);  // the side stream's fork and join
  cudaEvent_t fork = fork_join.events[0], join = fork_join.events[1];
  AllReduce allreduce(comm, max_bytes);
  fill_kernel<<<132, 1024, 0, stream.get()>>>(static_cast<__nv_bfloat16*>(input.get()), max_bytes / 2, rank);
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  bootstrap->barrier();

  uint64_t calls = 0;  // NOTE [CE probe buffer reuse]: the parity of each call
  auto enqueue = [&](size_t bytes, int chunks, bool handshake, cudaStream_t s) {
    const int parity = handshake ? 0 : int(calls++ & 1);
    const size_t packs = bytes / kPackBytes, chunk_packs = (packs + chunks - 1) / chunks;
    char* remote_scratch = static_cast<char*>(scratch.peer(peer)) + parity * max_bytes;
    uint64_t* remote_flags = static_cast<uint64_t*>(flags.peer(peer)) + parity * kMaxChunks;
    FERRY_CUDA_CHECK(cudaEventRecord(fork, s));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(side.get(), fork, 0));
    for (int c = 0; c < chunks; ++c) {
      const size_t first = size_t(c) * chunk_packs, n = std::min(packs, first + chunk_packs) - std::min(packs, first);
      if (n > 0)
        FERRY_CUDA_CHECK(cudaMemcpyAsync(remote_scratch + first * kPackBytes,
                                         static_cast<const char*>(input.get()) + first * kPackBytes, n * kPackBytes,
                                         cudaMemcpyDeviceToDevice, side.get()));
      memops.write(side.get(), remote_flags + c, 1);
    }
    ProbeParams p{};
    p.in = static_cast<const uint4*>(input.get());
    p.out = static_cast<uint4*>(output.get());
    p.landed = reinterpret_cast<const uint4*>(static_cast<char*>(scratch.peer(rank)) + parity * max_bytes);
    p.flags = static_cast<uint64_t*>(flags.peer(rank)) + parity * kMaxChunks;
    p.blocks_done = blocks_done + parity;
    if (handshake) {
      p.peer_consumed = static_cast<uint64_t*>(flags.peer(peer)) + 2 * kMaxChunks;
      p.consumed = static_cast<uint64_t*>(flags.peer(rank)) + 2 * kMaxChunks;
    }
    p.wait = wait;
    p.rank = rank;
    p.packs = packs;
    p.chunk_packs = chunk_packs;
    p.chunks = chunks;
    ce_reduce_kernel<<<o.blocks, kThreads, 0, s>>>(p);
    FERRY_CUDA_CHECK(cudaGetLastError());
    FERRY_CUDA_CHECK(cudaEventRecord(join, side.get()));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
  };
  // A wait that ran out is the communicator's error: synchronize throws it, naming rank, peer and phase.
  auto synchronize = [&](cudaStream_t s) { comm.synchronize(s); };
  auto check = [&](size_t bytes, const std::function<void(cudaStream_t)>& op) {
    FERRY_CUDA_CHECK(cudaMemset(output.get(), 0xFF, bytes));
    FERRY_CUDA_CHECK(cudaMemset(mismatches.get(), 0, sizeof(unsigned long long)));
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    bootstrap->barrier();
    op(stream.get());
    check_kernel<<<132, 1024, 0, stream.get()>>>(static_cast<const __nv_bfloat16*>(output.get()), bytes / 2,
                                                   static_cast<unsigned long long*>(mismatches.get()));
    unsigned long long bad = 0;
    FERRY_CUDA_CHECK(cudaMemcpyAsync(&bad, mismatches.get(), sizeof(bad), cudaMemcpyDeviceToHost, stream.get()));
    synchronize(stream.get());
    const std::vector<unsigned long long> all = bootstrap->all_gather_value(bad);
    return std::all_of(all.begin(), all.end(), [](unsigned long long b) { return b == 0; });
  };

  if (leader) {
    std::printf("ferry-bench ce-allreduce: 2 ranks, bf16 sum, %d reduce blocks of %d threads; us per call, median of\n"
                "graph replays (even calls per graph), max over ranks; '!' failed check; +hs: one buffer and a\n"
                "consumed handshake per call (what a library call must do, NOTE [CE probe buffer reuse])\n\n%-10s %10s",
                o.blocks, kThreads, "bytes", "ferry auto");
    for (int c : o.chunks) std::printf(" %8s%-3d", "ce x", c);
    for (int c : o.chunks) std::printf(" %8s%-3d", "ce+hs x", c);
    std::printf("\n");
  }
  std::optional<CsvWriter> csv;
  if (leader && !o.csv_path.empty()) csv.emplace(o.csv_path, std::vector<std::string>{"bytes", "impl", "chunks", "us", "ok"});
  TimingOptions timing;
  timing.ops_per_graph = 10;  // even: NOTE [CE probe buffer reuse]
  for (size_t bytes : o.sizes) {
    const size_t count = bytes / 2;
    auto ferry_op = [&](cudaStream_t s) {
      allreduce.run(input.get(), output.get(), count, DataType::kBFloat16, ReduceOp::kSum, s);
    };
    const bool ferry_ok = check(bytes, ferry_op);
    const TimingResult ferry_t = time_op({"ferry", ferry_op, synchronize}, stream.get(), *bootstrap, timing);
    if (leader) std::printf("%-10s %9.1f%s", format_byte_size(bytes).c_str(), ferry_t.op_us, ferry_ok ? " " : "!");
    if (csv) csv->write_row({std::to_string(bytes), "ferry", "0", format_fixed(ferry_t.op_us, 2), ferry_ok ? "1" : "0"});
    // Each case starts with check(), which waits for both devices and meets the peer, so the
    // two variants' buffers never overlap in time.
    for (bool handshake : {false, true}) {
      for (int chunks : o.chunks) {
        auto ce_op = [&, chunks, handshake](cudaStream_t s) { enqueue(bytes, chunks, handshake, s); };
        const bool ok = check(bytes, ce_op);
        const TimingResult t = time_op({"ce", ce_op, synchronize}, stream.get(), *bootstrap, timing);
        const char* impl = handshake ? "ce_hs" : "ce";
        if (leader) std::printf(" %10.1f%s", t.op_us, ok ? " " : "!");
        if (csv) csv->write_row({std::to_string(bytes), impl, std::to_string(chunks), format_fixed(t.op_us, 2), ok ? "1" : "0"});
      }
    }
    if (leader) std::printf("\n");
    std::fflush(stdout);
  }
  comm.heap().release(flags);
  comm.heap().release(scratch);
  return 0;
}

}  // namespace ferry::bench
