// Symmetric heap on real GPUs (mpirun -np N, one GPU per rank): allocate and
// register_buffer (sub-ranges at odd offsets of a larger allocation) give every
// rank pointers to its peers' memory through CUDA IPC, and bytes written by one
// rank are read (and written) by the others through those pointers. Also: a
// Communicator uses the device its caller made current (or named in its options).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/symmetric_heap.hpp"

namespace {

using ferry::testing::all_ranks;
using ferry::testing::mpi_rank;
using ferry::testing::mpi_size;
using ferry::testing::share_gpus;

// Non-fatal on purpose: a rank must not leave a test early while its peers go on
// into a collective (barrier, release) and wait for it.
#define CUDA_OK(expr)                                                                \
  do {                                                                               \
    cudaError_t err_ = (expr);                                                       \
    EXPECT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);       \
  } while (0)

// One Communicator for the whole file, created on first use (collectively: every
// rank runs the same tests in the same order) and destroyed before MPI_Finalize.
std::unique_ptr<ferry::Communicator>& shared_comm() {
  static std::unique_ptr<ferry::Communicator> comm;
  return comm;
}
ferry::Communicator& comm() {
  auto& c = shared_comm();
  if (!c) c = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>());
  return *c;
}
[[maybe_unused]] ::testing::Environment* const kHeapEnv =
    ::testing::AddGlobalTestEnvironment(new ferry::testing::TearDownEnvironment([] { shared_comm().reset(); }));

// The byte rank `r` writes at offset `i` of buffer `salt`.
uint8_t pattern(int r, size_t i, uint32_t salt) {
  uint64_t x = (static_cast<uint64_t>(r) + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull) ^ salt;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  return static_cast<uint8_t>(x >> 56);
}
std::vector<uint8_t> pattern_bytes(int r, size_t offset, size_t bytes, uint32_t salt) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(r, offset + i, salt);
  return v;
}
// Index of the first differing byte, or -1.
long long first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) return static_cast<long long>(i);
  return a.size() == b.size() ? -1 : static_cast<long long>(std::min(a.size(), b.size()));
}

void expect_peer_pointers(const ferry::SymmetricBuffer& b) {
  // Same creation order everywhere: the id agrees on every rank. (Collective first,
  // so no rank skips it by returning early below.)
  const auto ids = comm().bootstrap().all_gather_value(b.id);
  for (int r = 0; r < mpi_size(); ++r) EXPECT_EQ(ids[r], b.id) << "rank " << r;
  const ferry::Topology& t = comm().topology();
  EXPECT_NE(b.local, nullptr);
  ASSERT_EQ(b.peers.size(), static_cast<size_t>(mpi_size()));
  EXPECT_EQ(b.peers[mpi_rank()], b.local);
  EXPECT_EQ(b.peer(mpi_rank()), b.local);
  for (int r = 0; r < mpi_size(); ++r) {
    if (t.same_node(r)) {
      EXPECT_NE(b.peers[r], nullptr) << "peer " << r;
    } else {
      EXPECT_EQ(b.peers[r], nullptr) << "peer " << r << " is in another node";
    }
  }
}

// Every rank checks the `bytes` bytes at every local peer's `ptrs[r]` against
// pattern(r, offset, salt) (the owner wrote them before the last barrier).
void expect_peers_hold_patterns(const std::vector<void*>& ptrs, size_t offset, size_t bytes, uint32_t salt) {
  const ferry::Topology& t = comm().topology();
  if (ptrs.size() != static_cast<size_t>(mpi_size())) {
    ADD_FAILURE() << "peers has " << ptrs.size() << " entries for " << mpi_size() << " ranks";
    return;
  }
  std::vector<uint8_t> got(bytes);
  for (int r = 0; r < mpi_size(); ++r) {
    if (!t.same_node(r)) continue;
    std::fill(got.begin(), got.end(), 0);
    CUDA_OK(cudaMemcpy(got.data(), ptrs[r], bytes, cudaMemcpyDefault));
    const long long d = first_diff(got, pattern_bytes(r, offset, bytes, salt));
    EXPECT_EQ(d, -1) << "rank " << mpi_rank() << " reading peer " << r << ": first wrong byte at " << d;
  }
}

TEST(Heap, OneGpuPerRank) {
  FERRY_REQUIRE_GPUS();
  ferry::Communicator& c = comm();
  int current = -1;
  CUDA_OK(cudaGetDevice(&current));
  EXPECT_EQ(c.device(), current) << "the communicator's device is the current device";
  EXPECT_GT(c.num_sms(), 0);
  char bus[64] = {};
  CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof(bus), c.device()));
  std::vector<char> all(64 * static_cast<size_t>(mpi_size()));
  MPI_Allgather(bus, 64, MPI_CHAR, all.data(), 64, MPI_CHAR, MPI_COMM_WORLD);
  if (share_gpus()) return;  // virtual ranks share GPUs on purpose
  for (int a = 0; a < mpi_size(); ++a)
    for (int b = a + 1; b < mpi_size(); ++b)
      if (c.topology().same_node(a) && c.topology().same_node(b)) {
        EXPECT_STRNE(all.data() + 64 * a, all.data() + 64 * b) << "ranks " << a << " and " << b << " share a GPU";
      }
}

// NOTE [SM budget] (communicator.hpp): ranks sharing a GPU split its SMs, so
// their spinning grids fit on it together; one rank per GPU keeps all of them.
// The same budget on every rank (blocks pair by index across ranks).
TEST(Heap, SmBudgetSplitsASharedGpu) {
  FERRY_REQUIRE_GPUS();
  ferry::Communicator& c = comm();
  char mine[128] = {};
  gethostname(mine, 63);
  CUDA_OK(cudaDeviceGetPCIBusId(mine + 64, 64, c.device()));
  std::vector<char> all(128 * static_cast<size_t>(mpi_size()));
  MPI_Allgather(mine, 128, MPI_CHAR, all.data(), 128, MPI_CHAR, MPI_COMM_WORLD);
  int sharing = 0;
  for (int r = 0; r < mpi_size(); ++r)
    sharing += std::strncmp(all.data() + 128 * r, mine, 64) == 0 &&
               std::strncmp(all.data() + 128 * r + 64, mine + 64, 64) == 0;
  EXPECT_EQ(c.ranks_sharing_device(), sharing);
  EXPECT_GE(c.sm_budget(), 1);
  EXPECT_LE(c.sm_budget(), std::max(1, c.num_sms() / sharing));
  if (!share_gpus()) EXPECT_EQ(sharing, 1);
  int budget = c.sm_budget(), lowest = 0, highest = 0;
  MPI_Allreduce(&budget, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&budget, &highest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lowest, highest) << "every rank has the same SM budget";
  // EP keeps to it (low-latency asks for every SM by default).
  ferry::EpConfig cfg;
  cfg.max_tokens_per_rank = 8;
  cfg.hidden = 256;
  cfg.topk = 2;
  cfg.num_experts = 2 * mpi_size();
  cfg.mode = ferry::EpMode::kLowLatency;
  ferry::EpBuffer ep(c, cfg);
  EXPECT_EQ(ep.config().num_sms, c.sm_budget());
}

TEST(Heap, AllocatePeersReadEachOther) {
  FERRY_REQUIRE_GPUS();
  ferry::SymmetricHeap& heap = comm().heap();
  const size_t before = heap.num_buffers();
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{1} << 20, (size_t{3} << 20) + 5}) {
    SCOPED_TRACE("bytes " + std::to_string(bytes));
    const uint32_t salt = static_cast<uint32_t>(bytes);
    ferry::SymmetricBuffer b = heap.allocate(bytes);
    EXPECT_GE(b.bytes, bytes);
    EXPECT_EQ(heap.num_buffers(), before + 1);
    expect_peer_pointers(b);
    ASSERT_TRUE(all_ranks(b.local != nullptr));

    // Allocated memory is zeroed.
    std::vector<uint8_t> local(bytes, 0xAB);
    CUDA_OK(cudaMemcpy(local.data(), b.local, bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(first_diff(local, std::vector<uint8_t>(bytes, 0)), -1) << "allocate must zero the memory";

    const auto mine = pattern_bytes(mpi_rank(), 0, bytes, salt);
    CUDA_OK(cudaMemcpy(b.local, mine.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    comm().bootstrap().barrier();
    expect_peers_hold_patterns(b.peers, 0, bytes, salt);
    comm().bootstrap().barrier();  // nobody frees while a peer still reads
    heap.release(b);
    EXPECT_EQ(heap.num_buffers(), before);
  }
}

TEST(Heap, PeersWriteIntoEachOther) {
  FERRY_REQUIRE_GPUS();
  ferry::SymmetricHeap& heap = comm().heap();
  const ferry::Topology& t = comm().topology();
  const size_t slot = 8192 + 24;  // per writer; slots start at unaligned offsets
  const size_t n = static_cast<size_t>(mpi_size());
  ferry::SymmetricBuffer b = heap.allocate(slot * n);
  expect_peer_pointers(b);
  ASSERT_TRUE(all_ranks(b.local != nullptr));
  // Rank w writes its pattern into slot w of every local peer's buffer.
  const auto mine = pattern_bytes(mpi_rank(), 0, slot, 77);
  for (int r = 0; r < mpi_size(); ++r) {
    if (!t.same_node(r)) continue;
    CUDA_OK(cudaMemcpy(static_cast<char*>(b.peers[r]) + slot * mpi_rank(), mine.data(), slot, cudaMemcpyDefault));
  }
  CUDA_OK(cudaDeviceSynchronize());
  comm().bootstrap().barrier();
  std::vector<uint8_t> local(slot * n);
  CUDA_OK(cudaMemcpy(local.data(), b.local, local.size(), cudaMemcpyDeviceToHost));
  for (int w = 0; w < mpi_size(); ++w) {
    std::vector<uint8_t> got(local.begin() + slot * w, local.begin() + slot * (w + 1));
    const auto want = t.same_node(w) ? pattern_bytes(w, 0, slot, 77) : std::vector<uint8_t>(slot, 0);
    EXPECT_EQ(first_diff(got, want), -1) << "slot written by rank " << w;
  }
  comm().bootstrap().barrier();
  heap.release(b);
}

TEST(Heap, RegisterSubRangesOfOneAllocation) {
  FERRY_REQUIRE_GPUS();
  ferry::SymmetricHeap& heap = comm().heap();
  const size_t total = size_t{4} << 20;
  void* base = nullptr;
  CUDA_OK(cudaMalloc(&base, total));
  ASSERT_TRUE(all_ranks(base != nullptr));
  const auto whole = pattern_bytes(mpi_rank(), 0, total, 5);
  CUDA_OK(cudaMemcpy(base, whole.data(), total, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());

  // Two registrations inside the same cudaMalloc allocation, neither at its start.
  const size_t off_a = 4096 + 256, bytes_a = size_t{1} << 20;
  const size_t off_b = (size_t{2} << 20) + 768 + 3, bytes_b = (size_t{512} << 10) + 5;
  const size_t before = heap.num_buffers();
  ferry::SymmetricBuffer a = heap.register_buffer(static_cast<char*>(base) + off_a, bytes_a);
  ferry::SymmetricBuffer b = heap.register_buffer(static_cast<char*>(base) + off_b, bytes_b);
  EXPECT_EQ(heap.num_buffers(), before + 2);
  EXPECT_EQ(a.local, static_cast<char*>(base) + off_a);
  EXPECT_EQ(b.local, static_cast<char*>(base) + off_b);
  EXPECT_EQ(a.bytes, bytes_a);
  EXPECT_EQ(b.bytes, bytes_b);
  EXPECT_NE(a.id, b.id);
  expect_peer_pointers(a);
  expect_peer_pointers(b);
  const bool ok = all_ranks(a.local && b.local);
  if (ok) {
    comm().bootstrap().barrier();
    expect_peers_hold_patterns(a.peers, off_a, bytes_a, 5);
    expect_peers_hold_patterns(b.peers, off_b, bytes_b, 5);

    // A peer writes through the registered range; the owner sees it in its own allocation.
    const ferry::Topology& t = comm().topology();
    const int to = t.ranks_in_node[(t.local_rank + 1) % t.local_size];
    const auto note = pattern_bytes(mpi_rank(), 0, 4099, 99);
    comm().bootstrap().barrier();
    CUDA_OK(cudaMemcpy(static_cast<char*>(a.peers[to]) + 17, note.data(), note.size(), cudaMemcpyDefault));
    CUDA_OK(cudaDeviceSynchronize());
    comm().bootstrap().barrier();
    const int from = t.ranks_in_node[(t.local_rank + t.local_size - 1) % t.local_size];
    std::vector<uint8_t> got(note.size());
    CUDA_OK(cudaMemcpy(got.data(), static_cast<char*>(base) + off_a + 17, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(first_diff(got, pattern_bytes(from, 0, 4099, 99)), -1) << "written by rank " << from;
  }
  comm().bootstrap().barrier();

  // Releasing one registration leaves the other (same peer allocation) mapped.
  heap.release(a);
  EXPECT_EQ(heap.num_buffers(), before + 1);
  if (ok) {
    comm().bootstrap().barrier();
    expect_peers_hold_patterns(b.peers, off_b, bytes_b, 5);
  }
  comm().bootstrap().barrier();
  heap.release(b);
  EXPECT_EQ(heap.num_buffers(), before);
  CUDA_OK(cudaFree(base));
}

TEST(Heap, RegisterAgainAfterRelease) {
  FERRY_REQUIRE_GPUS();
  ferry::SymmetricHeap& heap = comm().heap();
  const size_t total = size_t{1} << 20;
  void* base = nullptr;
  CUDA_OK(cudaMalloc(&base, total));
  ASSERT_TRUE(all_ranks(base != nullptr));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const size_t off = 4096 * round + 256, bytes = 65536 + round;
    const auto data = pattern_bytes(mpi_rank(), off, bytes, 11 + round);
    CUDA_OK(cudaMemcpy(static_cast<char*>(base) + off, data.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    ferry::SymmetricBuffer b = heap.register_buffer(static_cast<char*>(base) + off, bytes);
    expect_peer_pointers(b);
    if (all_ranks(b.local != nullptr)) {
      comm().bootstrap().barrier();
      expect_peers_hold_patterns(b.peers, off, bytes, 11 + round);
    }
    comm().bootstrap().barrier();
    heap.release(b);
  }
  // The heap still allocates after registrations come and go.
  ferry::SymmetricBuffer c = heap.allocate(12345);
  expect_peer_pointers(c);
  comm().bootstrap().barrier();
  heap.release(c);
  CUDA_OK(cudaFree(base));
}

// Makes `device` current for one scope; the device that was current before is
// current again when the scope ends, however it ends.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    CUDA_OK(cudaGetDevice(&previous_));
    CUDA_OK(cudaSetDevice(device));
  }
  ~CurrentDevice() { CUDA_OK(cudaSetDevice(previous_)); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

// Each rank makes device (local rank + 1) % device_count current, then builds a
// Communicator with make_options(that device): it must use that device.
// Collective: every rank builds and destroys the communicator, whatever the
// (non-fatal) checks say.
template <typename MakeOptions>
void expect_communicator_keeps_current_device(MakeOptions make_options) {
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  if (!all_ranks(count >= 2)) GTEST_SKIP() << "needs 2 GPUs, " << count << " visible";
  // The shared communicator first (if no earlier test made it): it makes the
  // default device choice current, and that is the device restored below, so the
  // tests after this one (and their own communicators) see what they always see.
  const ferry::Topology& t = comm().topology();
  int before = -1;
  CUDA_OK(cudaGetDevice(&before));
  EXPECT_EQ(before, comm().device());

  const int device = (t.local_rank + 1) % count;
  {
    CurrentDevice current(device);
    std::unique_ptr<ferry::Communicator> c;
    std::string error;
    try {
      c = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>(), make_options(device));
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_EQ(error, "") << "rank " << mpi_rank() << " could not build a Communicator on device " << device;
    if (c) {
      EXPECT_EQ(c->device(), device) << "rank " << mpi_rank() << " made device " << device << " current";
      int now = -1;
      CUDA_OK(cudaGetDevice(&now));
      EXPECT_EQ(now, device) << "the communicator changed the current device";
    }
    c.reset();  // on every rank, before the device is restored
  }
  int after = -1;
  CUDA_OK(cudaGetDevice(&after));
  EXPECT_EQ(after, before) << "the current device was not restored";
}

TEST(Heap, CommunicatorKeepsTheDeviceTheCallerMadeCurrent) {
  FERRY_REQUIRE_GPUS();
  expect_communicator_keeps_current_device([](int) { return ferry::CommunicatorOptions{}; });
}

TEST(Heap, CommunicatorUsesTheDeviceInItsOptions) {
  FERRY_REQUIRE_GPUS();
  expect_communicator_keeps_current_device([](int d) { return ferry::CommunicatorOptions{.device = d}; });
}

}  // namespace
