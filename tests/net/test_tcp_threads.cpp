// The transport's own threads over tcp (mp tier, under mpirun, every rank its own virtual node): the receive
// workers (NOTE [A receive worker for tcp]) and the send lanes of several tcp streams (NOTE [Several tcp
// streams]). Run with UCX_TLS=tcp and with shared memory (tests/CMakeLists.txt), where they must be absent.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "net/tcp_plan.hpp"
#include "net/net_harness.hpp"

namespace {

using ferry::testing::all_ranks;
using ferry::testing::HostNet;
using ferry::testing::mpi_rank;
using ferry::testing::mpi_size;
using ferry::testing::pattern;
using ferry::testing::ScopedEnv;

constexpr auto kTimeout = std::chrono::milliseconds(60000);

// NOTE [A receive worker for tcp] (ucx_receive_worker.hpp): over tcp (and
// FERRY_UCX_RECEIVE_THREAD unset) the peers' puts land through a worker of their
// own thread, so a rank whose proxy thread is stuck (here: the test holds its
// lock, so it progresses nothing) still receives, and the sender's quiet (which
// waits for the target's acknowledgement) completes. With one worker, rank 0's
// quiet would run into its timeout. Elsewhere (shared memory) no receive worker.
TEST(Proxy, TcpPutsLandWhileTheTargetsProxyIsHeld) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  const int world = mpi_size(), me = mpi_rank();
  if (world < 2) GTEST_SKIP() << "needs a peer";
  const char* knob = std::getenv("FERRY_UCX_RECEIVE_THREAD");
  const bool expected = std::string(tls) == "tcp" && (knob == nullptr || std::string(knob) != "0");
  constexpr size_t kBytes = size_t{4} << 20;
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  HostNet net(*bootstrap, 2 * kBytes, 1, 64, std::chrono::milliseconds(20000));
  const bool own = net.proxy->transport().receives_on_own_thread();
  EXPECT_EQ(own, expected) << "UCX_TLS " << tls << ": " << net.proxy->transport().describe();
  if (!all_ranks(own)) GTEST_SKIP() << "no receive worker: " << net.proxy->transport().describe();
  for (size_t b = 0; b < kBytes; ++b) net.window[b] = static_cast<char>(pattern(me, 0, 11, b));
  bool quiet_done = true;
  {
    std::unique_lock<std::mutex> held(net.proxy->lock(), std::defer_lock);
    if (me != 0) held.lock();  // this rank's proxy thread now progresses nothing
    bootstrap->barrier();
    if (me == 0) {
      for (int p = 1; p < world; ++p) net.put(p, kBytes, 0, kBytes);  // into the second half
      try {
        net.proxy->quiet();
      } catch (const std::exception& e) {
        quiet_done = false;
        ADD_FAILURE() << e.what();
      }
    }
    bootstrap->barrier();  // the targets let go of their proxies only after rank 0's quiet
  }
  EXPECT_TRUE(quiet_done) << "rank 0's quiet did not complete while the targets' proxies were held";
  bool ok = true;
  for (size_t b = 0; me != 0 && b < kBytes && ok; ++b)
    ok = static_cast<uint8_t>(net.window[kBytes + b]) == pattern(0, 0, 11, b);
  EXPECT_TRUE(ok) << "rank " << me << ": rank 0's put is not in place after its quiet";
  bootstrap->barrier();
}

// NOTE [Several tcp streams] (ucx_send_lanes.hpp): over tcp with the receive
// worker, FERRY_UCX_TCP_STREAMS send lanes (unset: NOTE [tcp streams by default]; 1: none) and as many
// receive workers; elsewhere one. With 3 streams, every rank puts 8 MiB (1 MiB pieces, round-robin
// over the lanes) and many small put+signal pairs to every peer: each signal's
// data is in place when the signal is seen, the totals end exact, and a quiet
// covers it all.
TEST(Proxy, TcpStreamsAsConfigured) {
  const char* tls = std::getenv("FERRY_TEST_NET_TLS");
  if (tls == nullptr) GTEST_SKIP() << "FERRY_TEST_NET_TLS not set";
  const int world = mpi_size(), me = mpi_rank();
  if (world < 2) GTEST_SKIP() << "needs a peer";
  const char* receive = std::getenv("FERRY_UCX_RECEIVE_THREAD");
  const bool lanes = std::string(tls) == "tcp" && (receive == nullptr || std::string(receive) != "0");
  auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
  {
    const char* knob = std::getenv("FERRY_UCX_TCP_STREAMS");
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    const int unset = ferry::net::auto_tcp_streams(ferry::net::usable_cpus(), world);  // every rank on this host
    EXPECT_EQ(net.proxy->transport().tcp_streams(), lanes ? (knob != nullptr ? std::atoi(knob) : unset) : 1)
        << net.proxy->transport().describe();
    bootstrap->barrier();
  }
  {
    ScopedEnv one("FERRY_UCX_TCP_STREAMS", "1");
    HostNet net(*bootstrap, 4096, 1, 16, kTimeout);
    EXPECT_EQ(net.proxy->transport().tcp_streams(), 1) << net.proxy->transport().describe();
    bootstrap->barrier();
  }
  ScopedEnv three("FERRY_UCX_TCP_STREAMS", "3");
  constexpr size_t kBig = size_t{8} << 20, kSmall = 4096;
  constexpr int kSmallPuts = 64;
  const size_t slot = kBig + kSmallPuts * kSmall;  // [send: one slot][receive: a slot per source]
  HostNet net(*bootstrap, (1 + world) * slot, 2, 64, kTimeout);
  EXPECT_EQ(net.proxy->transport().tcp_streams(), lanes ? 3 : 1) << net.proxy->transport().describe();
  for (size_t b = 0; b < slot; ++b) net.window[b] = static_cast<char>(pattern(me, 0, 5, b));
  bootstrap->barrier();
  for (int k = 1; k < world; ++k) {
    const int p = (me + k) % world;
    net.put_with_signal(p, (1 + me) * slot, 0, kBig, 0, 1);
    for (int i = 0; i < kSmallPuts; ++i) {
      const size_t at = kBig + i * kSmall;
      net.put_with_signal(p, (1 + me) * slot + at, at, kSmall, 1, 1);
    }
  }
  bool ordered = true;
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    const char* got = net.window + (1 + p) * slot;
    net.wait_signal(p, 0, 1, kTimeout);  // the 8 MiB are in place once its signal is
    for (size_t b = 0; b < kBig && ordered; ++b) ordered = static_cast<uint8_t>(got[b]) == pattern(p, 0, 5, b);
    for (uint64_t seen = 0; seen < kSmallPuts && ordered;) {
      seen = net.signal_from(p, 1);
      for (size_t b = kBig; b < kBig + seen * kSmall && ordered; ++b)
        ordered = static_cast<uint8_t>(got[b]) == pattern(p, 0, 5, b);
      if (seen < kSmallPuts) net.wait_signal(p, 1, seen + 1, kTimeout);
    }
    EXPECT_EQ(net.signal_from(p, 1), static_cast<uint64_t>(kSmallPuts)) << "from rank " << p;
  }
  EXPECT_TRUE(ordered) << "rank " << me << ": a signal was seen before its data";
  net.proxy->quiet();
  bootstrap->barrier();
}

}  // namespace
