// The device API across virtual nodes (mpirun -np N; FERRY_RANKS_PER_NODE=k
// makes nodes of k ranks, so peers in the node take NVLink and the others the
// proxy; unset: one node, NVLink only). Kernels put buffers of random sizes
// into every peer's window, signal after each, and the receivers' blocks wait
// for each signal and check the data it covers: a signal that overtook its
// data, a lost or misplaced put fails. Also under CUDA graph replay, with a
// FIFO of 8 entries (producers wait), and with a peer that never signals.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/ep.hpp"
#include "ferry/window.hpp"
#include "net/proxy.hpp"

namespace {

using namespace ferry::testing;

struct ExchangeParams {
  ferry::DeviceWindow w;
  const uint64_t* round;          // device: rounds completed (advanced by advance_round)
  int num_puts;                   // per ordered pair of ranks, per round
  uint32_t max_bytes;
  uint64_t seed;
  uint64_t slot;                  // bytes of one pair's area
  unsigned long long* mismatches; // device counters
  unsigned long long* checked_bytes;
  int* failed_waits;
};

__host__ __device__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__host__ __device__ uint32_t put_bytes(const ExchangeParams& p, int sender, int receiver, int i) {
  const uint64_t r = mix64(p.seed ^ (uint64_t(sender) << 48) ^ (uint64_t(receiver) << 40) ^ uint64_t(i));
  const uint32_t cap = (r & 3) == 0 ? p.max_bytes : (p.max_bytes > 64 ? p.max_bytes / 64 : 1);
  return 1 + static_cast<uint32_t>((r >> 8) % cap);
}
__device__ uint8_t pattern_byte(int sender, int receiver, uint64_t round, int i, uint64_t pos) {
  return static_cast<uint8_t>(mix64((uint64_t(sender) << 56) ^ (uint64_t(receiver) << 48) ^ (round << 36) ^
                                    (uint64_t(i) << 24) ^ pos));
}
__host__ __device__ uint64_t align16(uint64_t n) { return (n + 15) / 16 * 16; }

// Blocks [0, W-1): send to peer me+1+b. Blocks [W-1, 2W-2): receive from peer
// me+1+b' and check. Window: [send area: W slots][receive area: W slots].
// NOTE [Window test rounds]: round r's puts overwrite round r-1's data, so a
// sender first waits for the receiver's "done reading round r-1" (signal 1).
__global__ void exchange_kernel(ExchangeParams p) {
  namespace dev = ferry::device;
  const int world = p.w.world_size, me = p.w.rank, peers = world - 1;
  const uint64_t round = *reinterpret_cast<const volatile uint64_t*>(p.round);
  __shared__ int ok;
  if (blockIdx.x < static_cast<unsigned>(peers)) {
    const int peer = (me + 1 + blockIdx.x) % world;
    if (threadIdx.x == 0) ok = dev::wait_signal(p.w, peer, 1, round);
    __syncthreads();
    if (!ok) {
      if (threadIdx.x == 0) atomicAdd(p.failed_waits, 1);
      return;
    }
    uint64_t offset = 0;
    for (int i = 0; i < p.num_puts; ++i) {
      const uint32_t n = put_bytes(p, me, peer, i);
      const uint64_t src = peer * p.slot + offset;
      for (uint32_t b = threadIdx.x; b < n; b += blockDim.x) p.w.local[src + b] = pattern_byte(me, peer, round, i, b);
      const uint64_t dst = (world + me) * p.slot + offset;
      if (i % 3 == 0) {  // a put, then a separate signal
        dev::put(p.w, peer, dst, src, n);
        __syncthreads();
        if (threadIdx.x == 0) dev::signal(p.w, peer, 0, 1);
      } else {
        dev::put_with_signal(p.w, peer, dst, src, n, 0, 1);
      }
      offset += align16(n);
    }
    __syncthreads();
    if (threadIdx.x == 0) dev::quiet(p.w);  // the source area is rewritten next round
  } else {
    const int peer = (me + 1 + (blockIdx.x - peers)) % world;
    const uint64_t base = round * p.num_puts;
    uint64_t offset = 0;
    unsigned long long bad = 0, checked = 0;
    for (int i = 0; i < p.num_puts; ++i) {
      if (threadIdx.x == 0) ok = dev::wait_signal(p.w, peer, 0, base + i + 1);
      __syncthreads();
      if (!ok) {
        if (threadIdx.x == 0) atomicAdd(p.failed_waits, 1);
        return;
      }
      const uint32_t n = put_bytes(p, peer, me, i);
      const volatile char* got = dev::recv_ptr(p.w, peer) + (world + peer) * p.slot + offset;
      for (uint32_t b = threadIdx.x; b < n; b += blockDim.x) {
        bad += static_cast<uint8_t>(got[b]) != pattern_byte(peer, me, round, i, b);
        ++checked;
      }
      offset += align16(n);
      __syncthreads();
    }
    atomicAdd(p.mismatches, bad);
    atomicAdd(p.checked_bytes, checked);
    __syncthreads();
    if (threadIdx.x == 0) dev::signal(p.w, peer, 1, 1);  // done reading this round
  }
}

__global__ void advance_round(uint64_t* round) { ++*round; }
__global__ void wait_forever_kernel(ferry::DeviceWindow w, int peer, int* result);

// NOTE [Lazy loading and the proxy] (src/communicator.cpp): advance_round is
// launched behind exchange_kernel, which waits on the proxy; loading it lazily
// at that launch would stall the proxy's CUDA calls until the exchange timed
// out. Load every kernel first, as a user of the device API must.
void load_kernels() {
  cudaFuncAttributes attributes;
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, exchange_kernel));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, advance_round));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, wait_forever_kernel));
}

struct Case {
  int num_puts;
  uint32_t max_bytes;
  size_t fifo;
  int rounds;
  bool graph;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "n" + std::to_string(c.num_puts) + "_max" + std::to_string(c.max_bytes) + "_fifo" + std::to_string(c.fifo) +
         "_rounds" + std::to_string(c.rounds) + (c.graph ? "_graph" : "");
}

class WindowExchange : public ::testing::TestWithParam<Case> {};

TEST_P(WindowExchange, SignalsNeverOvertakeData) {
  FERRY_REQUIRE_GPUS();
  const Case c = GetParam();
  const int world = mpi_size();
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  load_kernels();
  ferry::CommunicatorOptions options;
  options.proxy_fifo_entries = c.fifo;
  ferry::Communicator comm(std::make_shared<ferry::MpiBootstrap>(), options);
  ExchangeParams p{};
  p.num_puts = c.num_puts;
  p.max_bytes = c.max_bytes;
  p.seed = broadcast_test_seed("WindowExchange");
  p.slot = 0;
  for (int s = 0; s < world; ++s)
    for (int r = 0; r < world; ++r) {
      uint64_t total = 0;
      for (int i = 0; s != r && i < c.num_puts; ++i) total += align16(put_bytes(p, s, r, i));
      p.slot = std::max(p.slot, total);
    }
  ferry::Window window(comm, 2 * world * p.slot, ferry::WindowOptions{2});
  p.w = window.device();
  uint64_t* round = nullptr;
  unsigned long long* counters = nullptr;
  int* failed_waits = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&round, sizeof(uint64_t)));
  FERRY_CUDA_CHECK(cudaMalloc(&counters, 2 * sizeof(unsigned long long)));
  FERRY_CUDA_CHECK(cudaMalloc(&failed_waits, sizeof(int)));
  FERRY_CUDA_CHECK(cudaMemset(round, 0, sizeof(uint64_t)));
  FERRY_CUDA_CHECK(cudaMemset(counters, 0, 2 * sizeof(unsigned long long)));
  FERRY_CUDA_CHECK(cudaMemset(failed_waits, 0, sizeof(int)));
  p.round = round;
  p.mismatches = counters;
  p.checked_bytes = counters + 1;
  p.failed_waits = failed_waits;
  cudaStream_t stream;
  FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  comm.bootstrap().barrier();

  const dim3 grid(2 * (world - 1));
  auto launch = [&] {
    exchange_kernel<<<grid, 256, 0, stream>>>(p);
    advance_round<<<1, 1, 0, stream>>>(round);
  };
  if (c.graph) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    launch();
    FERRY_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    FERRY_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < c.rounds; ++r) FERRY_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    comm.synchronize(stream);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  } else {
    for (int r = 0; r < c.rounds; ++r) launch();
    comm.synchronize(stream);
  }
  unsigned long long host_counters[2] = {};
  int host_failed = 0;
  FERRY_CUDA_CHECK(cudaMemcpy(host_counters, counters, sizeof(host_counters), cudaMemcpyDeviceToHost));
  FERRY_CUDA_CHECK(cudaMemcpy(&host_failed, failed_waits, sizeof(int), cudaMemcpyDeviceToHost));
  unsigned long long expected_bytes = 0;
  for (int s = 0; s < world; ++s)
    for (int i = 0; s != mpi_rank() && i < c.num_puts; ++i) expected_bytes += put_bytes(p, s, mpi_rank(), i);
  expected_bytes *= c.rounds;
  EXPECT_EQ(host_failed, 0);
  EXPECT_EQ(host_counters[0], 0ull) << "bytes that differ from what the peers put";
  EXPECT_EQ(host_counters[1], expected_bytes) << "every byte of every put must be checked";
  // The path taken: peers of other nodes through the proxy, the others not.
  const bool spans_nodes = comm.topology().num_nodes > 1;
  EXPECT_EQ(window.uses_proxy(), spans_nodes);
  if (spans_nodes) {
    EXPECT_GT(comm.proxy()->retired(), 0u);
    int mapped = 0, mapped_signals = 0, remote = 0;
    for (int r = 0; r < world; ++r) {
      if (comm.topology().same_node(r)) continue;
      ++remote;
      mapped += window.maps_peer(r) ? 1 : 0;
      mapped_signals += window.maps_peer_signals(r) ? 1 : 0;
    }
    if (mpi_rank() == 0)
      std::printf("[ferry] %d nodes; proxy transport: %s; remote puts land in %s memory; %d of %d remote peers "
                  "mapped (NOTE [Mapped peers])\n",
                  comm.topology().num_nodes, comm.proxy()->transport().describe().c_str(),
                  window.network_writes_device_memory() ? "device" : "staged host", mapped, remote);
    // The device script sets this where UCX runs over shared memory (UCX_TLS=sm): the fast path must be taken.
    const char* expect = std::getenv("FERRY_TEST_EXPECT_MAPPED_PEERS");
    if (expect != nullptr && std::string(expect) == "1") {
      EXPECT_EQ(mapped, remote) << "every remote peer mapped";
      EXPECT_EQ(mapped_signals, remote) << "every remote peer's signal words mapped (NOTE [Mapped signals])";
    }
  }
  EXPECT_TRUE(all_ranks(host_counters[0] == 0 && host_failed == 0));
  cudaStreamDestroy(stream);
  cudaFree(round);
  cudaFree(counters);
  cudaFree(failed_waits);
  comm.bootstrap().barrier();
}

INSTANTIATE_TEST_SUITE_P(Puts, WindowExchange,
                         ::testing::Values(Case{1000, 512, 1024, 1, false},    // many small puts
                                           Case{300, 4096, 8, 2, false},       // FIFO of 8: producers wait
                                           Case{24, 1 << 20, 256, 1, false},   // up to 1 MiB (staging ring)
                                           Case{200, 2048, 256, 4, true}),     // CUDA graph replay
                         case_name);

__global__ void wait_forever_kernel(ferry::DeviceWindow w, int peer, int* result) {
  *result = ferry::device::wait_signal(w, peer, 0, 1) ? 1 : 0;
}

// A peer that never signals: the wait ends at the timeout and synchronize
// throws TimeoutError naming the peer and the phase.
TEST(Window, WaitSignalTimesOutNamingPeerAndPhase) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ferry::CommunicatorOptions options;
  options.timeout = std::chrono::milliseconds(1000);
  ferry::Communicator comm(std::make_shared<ferry::MpiBootstrap>(), options);
  ferry::Window window(comm, 4096);
  int* result = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&result, sizeof(int)));
  const int peer = (mpi_rank() + 1) % mpi_size();
  wait_forever_kernel<<<1, 1>>>(window.device(), peer, result);
  const auto msg = caught<ferry::TimeoutError>([&] { comm.synchronize(nullptr); });
  ASSERT_TRUE(msg.has_value());
  EXPECT_NE(msg->find("peer rank " + std::to_string(peer)), std::string::npos) << *msg;
  EXPECT_NE(msg->find("wait_signal"), std::string::npos) << *msg;
  cudaFree(result);
  comm.bootstrap().barrier();
}

// Across nodes the collectives take their cross-node paths (part 2 of the
// inter-node work): EP its window path, AllReduce the hierarchical algorithm.
TEST(Window, CollectivesTakeTheirCrossNodePaths) {
  FERRY_REQUIRE_GPUS();
  ferry::Communicator comm(std::make_shared<ferry::MpiBootstrap>());
  if (comm.topology().num_nodes == 1) GTEST_SKIP() << "one node";
  ferry::EpConfig config;
  config.max_tokens_per_rank = 16;
  config.hidden = 256;
  config.topk = 2;
  config.num_experts = 2 * mpi_size();
  {  // EP runs across nodes (its cross-node path, src/ep/internode_dispatch.cu, internode_combine.cu); tests/gpu/test_ep_*.cpp check it
    ferry::EpBuffer buffer(comm, config);
    EXPECT_TRUE(buffer.spans_nodes());
  }
  // AllReduce: auto is hierarchical across nodes (tests/gpu/test_allreduce.cpp checks
  // its results); an NVLink-only algorithm is refused, naming the one that works.
  ferry::AllReduce allreduce(comm, 1 << 20);
  EXPECT_EQ(allreduce.select(4096), ferry::AllReduceAlgorithm::kHierarchical);
  void* buffer = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&buffer, 4096));
  const auto ar = caught<ferry::NotSupported>([&] {
    allreduce.run(buffer, buffer, 1024, ferry::DataType::kFloat32, ferry::ReduceOp::kSum, nullptr,
                  ferry::AllReduceAlgorithm::kOneShot);
  });
  ASSERT_TRUE(ar.has_value());
  EXPECT_NE(ar->find("hierarchical"), std::string::npos) << *ar;
  cudaFree(buffer);
  comm.bootstrap().barrier();
}

// NOTE [Mapped signals]: a block stores a random-sized pattern into a mapped
// peer's landing buffer, then its thread 0 stores the word's total (no proxy);
// the peer's receiving block waits for the total, checks every byte, and acks
// the same way. A total seen before its data (one system fence after a block
// barrier is all the ordering there is) shows up as mismatches.
struct MappedSignalParams {
  ferry::DeviceWindow w;
  int peer;
  int rounds;
  uint32_t max_bytes;
  unsigned long long* mismatches;
  int* failed_waits;
};
constexpr uint32_t kDataWord = 1, kAckWord = 2;

__device__ uint8_t round_byte(int sender, int round, uint64_t pos) {
  return static_cast<uint8_t>(mix64((uint64_t(sender) << 48) ^ (uint64_t(round) << 32) ^ pos));
}
__device__ uint32_t round_bytes(int sender, int round, uint32_t max_bytes) {
  return 1 + static_cast<uint32_t>(mix64((uint64_t(sender) << 40) ^ uint64_t(round)) % max_bytes);
}

__global__ void mapped_signal_kernel(MappedSignalParams p) {
  namespace dev = ferry::device;
  const ferry::DeviceWindow& w = p.w;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int me = w.rank;
  for (int r = 0; r < p.rounds && !failed; ++r) {
    if (blockIdx.x == 0) {  // send round r, then wait for its ack
      char* dst = dev::mapped_ptr(w, p.peer);
      const uint32_t n = round_bytes(me, r, p.max_bytes);
      for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = static_cast<char>(round_byte(me, r, i));
      __syncthreads();
      if (threadIdx.x == 0) {
        dev::store_signal_total(w, p.peer, kDataWord, r + 1);
        if (!dev::wait_signal(w, p.peer, kAckWord, r + 1)) failed = 1;
      }
    } else {  // check the peer's round r, then ack it
      if (threadIdx.x == 0 && !dev::wait_signal(w, p.peer, kDataWord, r + 1)) failed = 1;
      __syncthreads();
      const char* src = dev::recv_ptr(w, p.peer);
      const uint32_t n = round_bytes(p.peer, r, p.max_bytes);
      unsigned long long bad = 0;
      for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
        bad += static_cast<uint8_t>(reinterpret_cast<const volatile char*>(src)[i]) != round_byte(p.peer, r, i);
      if (bad != 0) atomicAdd(p.mismatches, bad);
      __syncthreads();
      if (threadIdx.x == 0) dev::store_signal_total(w, p.peer, kAckWord, r + 1);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && failed) atomicAdd(p.failed_waits, 1);
}

TEST(Window, MappedSignalsFollowTheirData) {
  FERRY_REQUIRE_GPUS();
  ferry::Communicator comm(std::make_shared<ferry::MpiBootstrap>());
  if (mpi_size() != 2 || comm.topology().num_nodes != 2) GTEST_SKIP() << "needs 2 ranks as 2 virtual nodes";
  constexpr uint32_t kMaxBytes = 256 << 10;
  ferry::Window window(comm, kMaxBytes, ferry::WindowOptions{4});
  const int peer = 1 - mpi_rank();
  if (!all_ranks(window.maps_peer(peer) && window.maps_peer_signals(peer)))
    GTEST_SKIP() << "the peer's landing or signal words are not mapped (UCX_TLS=sm,self maps them)";
  MappedSignalParams p{window.device(), peer, 300, kMaxBytes, nullptr, nullptr};
  FERRY_CUDA_CHECK(cudaMalloc(&p.mismatches, sizeof(unsigned long long)));
  FERRY_CUDA_CHECK(cudaMalloc(&p.failed_waits, sizeof(int)));
  FERRY_CUDA_CHECK(cudaMemset(p.mismatches, 0, sizeof(unsigned long long)));
  FERRY_CUDA_CHECK(cudaMemset(p.failed_waits, 0, sizeof(int)));
  mapped_signal_kernel<<<2, 512>>>(p);
  comm.synchronize(nullptr);
  unsigned long long mismatches = 0;
  int failed = 0;
  FERRY_CUDA_CHECK(cudaMemcpy(&mismatches, p.mismatches, sizeof(mismatches), cudaMemcpyDeviceToHost));
  FERRY_CUDA_CHECK(cudaMemcpy(&failed, p.failed_waits, sizeof(failed), cudaMemcpyDeviceToHost));
  EXPECT_EQ(mismatches, 0ull) << "bytes read after their signal that were not the round's";
  EXPECT_EQ(failed, 0);
  // The words hold their totals: every round was signalled without the proxy.
  EXPECT_EQ(window.signals_from(peer)[kDataWord], 300u);
  EXPECT_EQ(window.signals_from(peer)[kAckWord], 300u);
  EXPECT_TRUE(all_ranks(mismatches == 0 && failed == 0));
  cudaFree(p.mismatches);
  cudaFree(p.failed_waits);
  comm.bootstrap().barrier();
}

}  // namespace
