// The proxy and the UCX transport on CPU (mp tier, under mpirun, every rank its
// own virtual node): host threads push the descriptors a kernel would, the
// proxy turns them into UCX puts and atomics. Run with UCX_TLS=tcp and with
// shared memory (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "net/net_harness.hpp"

namespace {

using ferry::testing::all_ranks;
using ferry::testing::caught;
using ferry::testing::ScopedEnv;
using ferry::testing::HostNet;
using ferry::testing::mix;
using ferry::testing::mpi_rank;
using ferry::testing::mpi_size;
using ferry::testing::pattern;

constexpr auto kTimeout = std::chrono::milliseconds(60000);

// The puts from one sender to one receiver: sizes in [1, max_bytes], packed one
// after another (so no put overwrites another and each can be checked).
struct Plan {
  std::vector<uint64_t> offset, size;
  uint64_t total = 0;
};

Plan make_plan(int sender, int receiver, int count, uint64_t max_bytes, uint64_t seed) {
  Plan plan;
  uint64_t state = seed ^ (static_cast<uint64_t>(sender) * 1000003u + static_cast<uint64_t>(receiver));
  for (int i = 0; i < count; ++i) {
    // Mostly small, some up to max_bytes: sizes of every magnitude.
    const uint64_t r = mix(state);
    const uint64_t cap = (r & 3) == 0 ? max_bytes : std::max<uint64_t>(1, max_bytes / 64);
    const uint64_t n = 1 + (r >> 8) % cap;
    plan.offset.push_back(plan.total);
    plan.size.push_back(n);
    plan.total += (n + 7) / 8 * 8;  // 8-byte aligned starts, odd sizes
  }
  return plan;
}

struct Case {
  int count;           // puts from every rank to every other rank
  uint64_t max_bytes;  // largest put
  size_t fifo;         // FIFO capacity (small: producers wait on a full FIFO)
};

class ProxyOrdering : public ::testing::TestWithParam<Case> {};

// Every rank puts `count` buffers of random sizes into every other rank's
// window, each followed by a signal (put_with_signal, or a put then a separate
// signal). A checker thread on the receiver reads the signal (acquire) and
// verifies every put it covers: a signal that overtook its data fails here.
TEST_P(ProxyOrdering, SignalNeverOvertakesData) {
  const Case c = GetParam();
  const int world = mpi_size(), me = mpi_rank();
  const uint64_t seed = ferry::testing::broadcast_test_seed("ProxyOrdering");
  std::vector<Plan> outgoing(world), incoming(world);
  uint64_t slot = 0;
  for (int s = 0; s < world; ++s)
    for (int r = 0; r < world; ++r)
      if (s != r) slot = std::max(slot, make_plan(s, r, c.count, c.max_bytes, seed).total);
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    outgoing[p] = make_plan(me, p, c.count, c.max_bytes, seed);
    incoming[p] = make_plan(p, me, c.count, c.max_bytes, seed);
  }
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  // [send area: world slots][receive area: world slots]
  HostNet net(*bootstrap, 2 * world * slot, 2, c.fifo, kTimeout);
  const size_t recv_base = world * slot;
  for (int p = 0; p < world; ++p)
    for (int i = 0; p != me && i < c.count; ++i)
      for (uint64_t b = 0; b < outgoing[p].size[i]; ++b)
        net.window[p * slot + outgoing[p].offset[i] + b] = static_cast<char>(pattern(me, p, i, b));
  bootstrap->barrier();

  std::atomic<bool> stop{false};
  std::string failure;
  std::atomic<uint64_t> observations{0};
  std::thread checker([&] {
    std::vector<int> verified(world, 0);
    // A stall, not a slow machine, fails the checker: the deadline moves with every signal seen
    // (4 ranks over tcp on 2 loaded cores took over 60 s in all while progressing).
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    int remaining = (world - 1) * c.count;
    while (remaining > 0 && failure.empty() && !stop.load()) {
      const int before = remaining;
      for (int p = 0; p < world && failure.empty(); ++p) {
        if (p == me) continue;
        const uint64_t seen = net.signal_from(p, 0);  // acquire
        observations.fetch_add(1, std::memory_order_relaxed);
        for (; verified[p] < static_cast<int>(seen) && failure.empty(); ++verified[p], --remaining) {
          const int i = verified[p];
          const char* got = net.window + recv_base + p * slot + incoming[p].offset[i];
          for (uint64_t b = 0; b < incoming[p].size[i]; ++b) {
            if (static_cast<uint8_t>(got[b]) != pattern(p, me, i, b)) {
              std::ostringstream os;
              os << "rank " << me << ": signal from rank " << p << " reads " << seen << " but put " << i << " ("
                 << incoming[p].size[i] << " bytes) differs at byte " << b;
              failure = os.str();
              break;
            }
          }
        }
      }
      if (remaining < before) deadline = std::chrono::steady_clock::now() + kTimeout;
      if (std::chrono::steady_clock::now() > deadline) failure = "checker saw no new signal within the timeout";
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });

  for (int i = 0; i < c.count; ++i) {
    for (int k = 1; k < world; ++k) {
      const int p = (me + k) % world;
      const size_t dst = recv_base + me * slot + outgoing[p].offset[i];
      const size_t src = p * slot + outgoing[p].offset[i];
      if (i % 3 == 0) {
        net.put(p, dst, src, outgoing[p].size[i]);
        net.signal(p, 0, 1);
      } else {
        net.put_with_signal(p, dst, src, outgoing[p].size[i], 0, 1);
      }
    }
  }
  net.proxy->quiet();
  for (int p = 0; p < world; ++p)
    if (p != me) net.wait_signal(p, 0, c.count, kTimeout);
  checker.join();
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_NO_THROW(net.proxy->check());
  EXPECT_GE(net.proxy->retired(), static_cast<uint64_t>(c.count) * (world - 1));
  bootstrap->barrier();  // nobody closes while a peer still reads its window
  EXPECT_TRUE(all_ranks(failure.empty()));
}

INSTANTIATE_TEST_SUITE_P(Sizes, ProxyOrdering,
                         ::testing::Values(Case{2000, 4096, 64},       // thousands of small puts
                                           Case{3000, 64, 8},          // tiny FIFO: producers wait, nothing lost
                                           Case{200, 256 << 10, 1024}  // up to 256 KiB
                                           ),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.count) + "_max" +
                                  std::to_string(info.param.max_bytes) + "_fifo" + std::to_string(info.param.fifo);
                         });

// Whether tcp endpoints keep UCX's peer-failure handling (FERRY_UCX_PEER_FAILURE=1 or on).
bool tcp_keeps_peer_failure() {
  const char* pf = std::getenv("FERRY_UCX_PEER_FAILURE");
  return pf != nullptr && (std::string(pf) == "1" || std::string(pf) == "on");
}

// The endpoints' peer-failure handling is what UCX_TLS and FERRY_UCX_PEER_FAILURE
// ask for: on tcp only with 1 (by default, auto, tcp-only endpoints connect again
// without it: NOTE [tcp without UCX's peer-failure handling]), never on shared
// memory (UCX refuses it there). FERRY_TEST_NET_TLS names the transport. The
// suite's other tests then run on those endpoints.
TEST(Proxy, PeerFailureHandlingAsConfigured) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  const char* pf = std::getenv("FERRY_UCX_PEER_FAILURE");
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
  const bool expected = std::string(tls) == "tcp" && tcp_keeps_peer_failure();
  EXPECT_EQ(net.proxy->transport().detects_peer_failure(), expected)
      << "UCX_TLS " << tls << ", FERRY_UCX_PEER_FAILURE=" << (pf ? pf : "(unset)") << ": "
      << net.proxy->transport().describe();
  bootstrap->barrier();
}

// NOTE [tcp segments] (ucx_transport.cpp): the transport asks UCX for
// FERRY_UCX_TCP_SEG_SIZE-byte tcp segments (64 KiB by default) where the user set
// neither UCX variable, leaves both to the user who set one, and asks for nothing
// with 0. Puts work in each case (HostNet's warm-up puts and flushes).
TEST(Proxy, TcpSegmentsAsConfigured) {
  if (std::getenv("FERRY_TEST_NET_TLS") == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  if (std::getenv("UCX_TCP_TX_SEG_SIZE") != nullptr || std::getenv("UCX_TCP_RX_SEG_SIZE") != nullptr ||
      std::getenv("FERRY_UCX_TCP_SEG_SIZE") != nullptr)
    GTEST_SKIP() << "the environment already chooses tcp segments";
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  {
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    const std::string what = net.proxy->transport().describe();
    EXPECT_NE(what.find("(tcp segments 65536 B)"), std::string::npos) << what;
    bootstrap->barrier();
  }
  {
    ScopedEnv user("UCX_TCP_RX_SEG_SIZE", "131072");
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    const std::string what = net.proxy->transport().describe();
    EXPECT_EQ(what.find("tcp segments"), std::string::npos) << what;
    bootstrap->barrier();
  }
  {
    ScopedEnv off("FERRY_UCX_TCP_SEG_SIZE", "0");
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    const std::string what = net.proxy->transport().describe();
    EXPECT_EQ(what.find("tcp segments"), std::string::npos) << what;
    bootstrap->barrier();
  }
}

// The transport says when every remote endpoint is tcp alone (the hierarchical
// AllReduce then launches fewer blocks): over tcp yes, over shared memory no.
TEST(Proxy, TransportKnowsTcpAlone) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
  EXPECT_EQ(net.proxy->transport().remote_lanes_all_tcp(), std::string(tls) == "tcp")
      << "UCX_TLS " << tls << ": " << net.proxy->transport().describe();
  bootstrap->barrier();
}

// NOTE [Put pieces over tcp] (ucx_transport.cpp): over tcp with peer-failure
// handling (FERRY_UCX_PEER_FAILURE=1) the proxy puts in 256 KiB pieces, elsewhere
// (shared memory; tcp without it, the default: zero-copy puts) in 4 MiB ones, and a
// FERRY_PROXY_PUT_CHUNK_BYTES the user set wins. A 1 MiB put counts its pieces
// (ProxyStats::puts) and arrives whole.
TEST(Proxy, PutPiecesFollowTheTransport) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  if (std::getenv("FERRY_PROXY_PUT_CHUNK_BYTES") != nullptr) GTEST_SKIP() << "the environment sets the pieces";
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  const size_t bytes = size_t{1} << 20;
  const auto check = [&](size_t expected_chunk, const std::string& what) {
    HostNet net(*bootstrap, 2 * bytes, 1, 16, kTimeout);
    EXPECT_EQ(net.proxy->put_chunk(), expected_chunk) << what << ": " << net.proxy->transport().describe();
    const int rank = bootstrap->rank(), peer = (rank + 1) % bootstrap->size();
    for (size_t i = 0; i < bytes; ++i) net.window[i] = static_cast<char>((i * 7 + rank) & 0x7f);
    bootstrap->barrier();
    const uint64_t before = net.proxy->stats().puts;
    net.put(peer, bytes, 0, bytes);  // into the peer's second half
    net.proxy->quiet();
    EXPECT_EQ(net.proxy->stats().puts - before, (bytes + expected_chunk - 1) / expected_chunk) << what;
    bootstrap->barrier();  // every put is complete at its target
    const int from = (rank + bootstrap->size() - 1) % bootstrap->size();
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += net.window[bytes + i] != static_cast<char>((i * 7 + from) & 0x7f);
    EXPECT_EQ(wrong, 0u) << what;
    bootstrap->barrier();
  };
  const bool emulated = std::string(tls) == "tcp" && tcp_keeps_peer_failure();
  {
    HostNet probe(*bootstrap, 4096, 1, 16, kTimeout);
    const size_t expected = probe.proxy->transport().tcp_streams() > 1 ? size_t{1} << 20  // NOTE [Several tcp streams]
                            : emulated                                 ? size_t{256} << 10
                                                                       : size_t{4} << 20;
    bootstrap->barrier();
    probe.proxy.reset();
    check(expected, std::string("UCX_TLS ") + tls);
  }
  {
    ScopedEnv user("FERRY_PROXY_PUT_CHUNK_BYTES", "131072");
    check(size_t{128} << 10, "FERRY_PROXY_PUT_CHUNK_BYTES=131072");
  }
}

// FERRY_UCX_GPU_MEMORY (NOTE [GPU-memory puts], ucx_transport.cpp): `on` where no
// endpoint has a transport that moves GPU memory (tcp, shared memory: no RDMA, no
// cuda_ipc) fails on every rank with NotSupported naming the knob and the
// endpoint's transports, not with a crash or a silently staged window; `auto`
// and `off` stage through host memory there.
TEST(Proxy, GpuMemoryOnWithoutAGpuTransportFailsClearly) {
  if (std::getenv("FERRY_TEST_NET_TLS") == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  {
    ScopedEnv on("FERRY_UCX_GPU_MEMORY", "on");
    const std::optional<std::string> what =
        caught<ferry::NotSupported>([&] { HostNet net(*bootstrap, 4096, 1, 16, kTimeout); });
    ASSERT_TRUE(what.has_value());
    EXPECT_NE(what->find("FERRY_UCX_GPU_MEMORY=on"), std::string::npos) << *what;
    EXPECT_NE(what->find(std::getenv("FERRY_TEST_NET_TLS") == std::string("tcp") ? "tcp" : "memory"),
              std::string::npos)
        << "the message names the endpoint's transports: " << *what;
  }
  bootstrap->barrier();
  for (const char* mode : {"auto", "off"}) {
    ScopedEnv set("FERRY_UCX_GPU_MEMORY", mode);
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    EXPECT_FALSE(net.proxy->transport().moves_cuda_memory()) << mode << ": " << net.proxy->transport().describe();
    bootstrap->barrier();
  }
}

// Transport::allocate_region / peer_pointer (docs/internode.md Part 5): over
// shared memory every rank maps every other rank's UCX-allocated region, and
// plain stores through that pointer land in the owner's memory; over tcp there
// is no mapping (nullptr).
TEST(Proxy, UcxAllocatedRegionsMapIntoPeersOverSharedMemory) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  const int world = mpi_size(), me = mpi_rank();
  constexpr size_t kSlot = 4096;
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
  ferry::net::Transport& transport = net.proxy->transport();
  void* mine = nullptr;
  const int region = transport.allocate_region(world * kSlot, &mine, net.proxy->lock());
  ASSERT_NE(mine, nullptr);
  const bool mapped = std::string(tls) == "sm";
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    void* theirs = transport.peer_pointer(p, region);
    if (!mapped) {
      EXPECT_EQ(theirs, nullptr) << "rank " << p << " over " << tls;
      continue;
    }
    ASSERT_NE(theirs, nullptr) << "no mapping of rank " << p << "'s region over " << tls;
    auto* slot = static_cast<uint8_t*>(theirs) + me * kSlot;
    for (size_t b = 0; b < kSlot; ++b) slot[b] = pattern(me, p, 11, b);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bootstrap->barrier();
  bool ok = true;
  for (int p = 0; p < world && mapped; ++p)
    for (size_t b = 0; p != me && b < kSlot && ok; ++b)
      ok = static_cast<const uint8_t*>(mine)[p * kSlot + b] == pattern(p, me, 11, b);
  EXPECT_TRUE(ok) << "rank " << me << ": a peer's stores through its mapping are missing";
  EXPECT_EQ(transport.peer_pointer(me, region), nullptr) << "no mapping of this rank's own region";
  bootstrap->barrier();
}

// Proxy::stats counts what the proxy did: every descriptor, each data put,
// each signal behind its fence, and every completion, with time spent > 0
// (FERRY_PROXY_STATS=1; without it the counts alone, times 0).
TEST(Proxy, StatsCountWhatItDid) {
  const int world = mpi_size(), me = mpi_rank();
  constexpr size_t kBytes = 64 << 10;
  constexpr int kPuts = 20;
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  ScopedEnv timed("FERRY_PROXY_STATS", "1");
  HostNet net(*bootstrap, world * kBytes, 1, 64, kTimeout);
  const int peer = (me + 1) % world;
  const ferry::net::ProxyStats before = net.proxy->stats();
  for (int i = 0; i < kPuts; ++i) net.put(peer, me * kBytes, me * kBytes, kBytes);
  net.put_with_signal(peer, me * kBytes, me * kBytes, kBytes, 0, 1);
  net.proxy->quiet();
  const ferry::net::ProxyStats after = net.proxy->stats();
  EXPECT_EQ(after.descriptors - before.descriptors, uint64_t{kPuts + 2});  // the puts, put_with_signal, quiet
  EXPECT_EQ(after.puts - before.puts, uint64_t{kPuts + 1});
  EXPECT_EQ(after.signals - before.signals, 1u);
  EXPECT_EQ(after.fences - before.fences, 1u);
  EXPECT_EQ(after.completed - before.completed, uint64_t{kPuts + 3});  // + the signal's put and the flush
  EXPECT_GT(after.issue_us, before.issue_us);
  EXPECT_GT(after.complete_us, before.complete_us);
  EXPECT_GE(after.issue_us - before.issue_us, after.fence_us - before.fence_us);
  net.wait_signal((me + world - 1) % world, 0, 1, kTimeout);
  bootstrap->barrier();
}

// NOTE [Signals after the batch's puts] (proxy.cpp): the signals of descriptors
// the proxy finds ready at once share one fence, and each still lands after its
// data; with FERRY_PROXY_HOLD_SIGNALS_BYTES=0, or a limit below one put's size,
// a fence goes before every signal. The test holds the proxy's lock while it
// pushes, so the proxy finds all of them ready in its next batch.
TEST(Proxy, SignalsOfOneBatchShareAFence) {
  const int world = mpi_size(), me = mpi_rank();
  if (world < 2) GTEST_SKIP() << "needs a peer";
  constexpr uint32_t kPieces = 16;
  constexpr size_t kPiece = 8 << 10, kSlot = kPieces * kPiece;
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  struct Case {
    const char* hold;
    uint64_t fences;
  };
  int round = 0;
  for (const Case c : {Case{nullptr, 1}, Case{"0", kPieces}, Case{"4096", kPieces}}) {
    ScopedEnv hold("FERRY_PROXY_HOLD_SIGNALS_BYTES", c.hold);
    HostNet net(*bootstrap, world * kSlot, kPieces, 64, kTimeout);
    const int to = (me + 1) % world, from = (me + world - 1) % world;
    ++round;
    for (size_t b = 0; b < kSlot; ++b) net.window[me * kSlot + b] = static_cast<char>(pattern(me, to, round, b));
    bootstrap->barrier();
    const ferry::net::ProxyStats before = net.proxy->stats();
    {
      std::lock_guard<std::mutex> held(net.proxy->lock());
      for (uint32_t k = 0; k < kPieces; ++k)
        net.put_with_signal(to, me * kSlot + k * kPiece, me * kSlot + k * kPiece, kPiece, k, k + 1);
    }
    bool ok = true;
    for (uint32_t k = 0; k < kPieces; ++k) {
      net.wait_signal(from, k, k + 1, kTimeout);
      for (size_t b = k * kPiece; b < (k + 1) * kPiece && ok; ++b)
        ok = static_cast<uint8_t>(net.window[from * kSlot + b]) == pattern(from, me, round, b);
      EXPECT_TRUE(ok) << "rank " << me << ": piece " << k << " from rank " << from << " is not in place after its "
                      << "signal (FERRY_PROXY_HOLD_SIGNALS_BYTES=" << (c.hold ? c.hold : "unset") << ")";
    }
    net.proxy->quiet();
    const ferry::net::ProxyStats after = net.proxy->stats();
    EXPECT_EQ(after.signals - before.signals, uint64_t{kPieces});
    EXPECT_EQ(after.fences - before.fences, c.fences) << "FERRY_PROXY_HOLD_SIGNALS_BYTES=" << (c.hold ? c.hold : "unset");
    bootstrap->barrier();
  }
}

TEST(Proxy, StatsCountWithoutTimesByDefault) {
  const int world = mpi_size(), me = mpi_rank();
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  ScopedEnv untimed("FERRY_PROXY_STATS", nullptr);
  HostNet net(*bootstrap, world * 4096, 1, 64, kTimeout);
  const ferry::net::ProxyStats before = net.proxy->stats();
  net.put((me + 1) % world, me * 4096, me * 4096, 4096);
  net.proxy->quiet();
  const ferry::net::ProxyStats after = net.proxy->stats();
  EXPECT_EQ(after.descriptors - before.descriptors, 2u);
  EXPECT_EQ(after.issue_us, 0.0);
  EXPECT_EQ(after.complete_us, 0.0);
  bootstrap->barrier();
}

// quiet() returns only once every earlier put is in place at its target: after
// it and a barrier, every receiver finds all the data without any signal.
TEST(Proxy, QuietMeansDelivered) {
  const int world = mpi_size(), me = mpi_rank();
  constexpr size_t kSlot = 1 << 20;
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 2 * world * kSlot, 1, 256, kTimeout);
  for (int p = 0; p < world; ++p)
    for (size_t b = 0; b < kSlot; ++b) net.window[p * kSlot + b] = static_cast<char>(pattern(me, p, 7, b));
  bootstrap->barrier();
  for (int k = 1; k < world; ++k) {
    const int p = (me + k) % world;
    for (size_t chunk = 0; chunk < kSlot; chunk += 64 << 10)
      net.put(p, world * kSlot + me * kSlot + chunk, p * kSlot + chunk, 64 << 10);
  }
  net.proxy->quiet();
  bootstrap->barrier();
  bool ok = true;
  for (int p = 0; p < world && ok; ++p)
    for (size_t b = 0; p != me && b < kSlot && ok; ++b)
      ok = static_cast<uint8_t>(net.window[world * kSlot + p * kSlot + b]) == pattern(p, me, 7, b);
  EXPECT_TRUE(ok) << "rank " << me << ": data missing after the peers' quiet";
  bootstrap->barrier();
}

// A descriptor past the window fails the proxy with a message naming it; the
// process does not crash and the communicator-level check throws.
TEST(Proxy, OutOfRangeDescriptorFailsCleanly) {
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
  const int peer = (mpi_rank() + 1) % mpi_size();
  net.put(peer, 0, 4000, 1000);  // src past the end
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!net.proxy->failed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const auto msg = ferry::testing::caught<ferry::TransportError>([&] { net.proxy->check(); });
  ASSERT_TRUE(msg.has_value());
  EXPECT_NE(msg->find("past the 4096-byte window"), std::string::npos) << *msg;
  bootstrap->barrier();
}

}  // namespace
