// TcpBootstrap and CallbackBootstrap in one process: every rank is a thread.
// Covers the collectives, the unique id, and failures: missing ranks must become
// TimeoutErrors naming them, and bad peers BootstrapErrors, within the timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include "common/tcp_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::ferry::testing::free_port;
using ::ferry::testing::kWireHello;
using ::ferry::testing::kWireMagic;
using ::ferry::testing::raw_connect;
using ::ferry::testing::threw;
using ::ferry::testing::WireHeader;
using ::ferry::testing::with_timeout;

// Runs fn(rank) on one thread per rank; returns what each rank threw (or null).
template <typename Fn>
std::vector<std::exception_ptr> run_ranks(int ranks, Fn fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
  }
}

std::vector<uint8_t> contribution(int rank, int round, size_t bytes) {
  std::mt19937 gen(static_cast<uint32_t>(rank * 7919 + round * 104729 + static_cast<int>(bytes)));
  std::vector<uint8_t> data(bytes);
  for (auto& b : data) b = static_cast<uint8_t>(gen());
  return data;
}

// all_gather of `bytes` per rank; checks every rank's slot in the result.
void check_all_gather(Bootstrap& boot, int round, size_t bytes) {
  const auto mine = contribution(boot.rank(), round, bytes);
  std::vector<uint8_t> result(bytes * static_cast<size_t>(boot.size()), 0xEE);
  boot.all_gather(mine.data(), result.data(), bytes);
  for (int r = 0; r < boot.size(); ++r) {
    const auto expected = contribution(r, round, bytes);
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), result.begin() + static_cast<long>(r * bytes)))
        << "rank " << boot.rank() << " got a wrong slot " << r << " (round " << round << ", " << bytes << " bytes)";
  }
}

// ---------------------------------------------------------------- unique id
TEST(TcpUniqueId, StringRoundTrip) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id("127.0.0.1", free_port());
  const std::string text = TcpBootstrap::id_to_string(id);
  EXPECT_EQ(text.size(), 256u);
  EXPECT_EQ(TcpBootstrap::id_from_string(text).bytes, id.bytes);
  std::string upper = text;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(TcpBootstrap::id_from_string(upper).bytes, id.bytes);
  EXPECT_NE(TcpBootstrap::create_unique_id("127.0.0.1", 5000).bytes,
            TcpBootstrap::create_unique_id("127.0.0.1", 5000).bytes)
      << "two ids must differ in their random magic";
}

TEST(TcpUniqueId, BadStringsRejected) {
  const std::string good = TcpBootstrap::id_to_string(TcpBootstrap::create_unique_id("127.0.0.1", 5000));
  std::string bad_char = good;
  bad_char[10] = 'g';
  for (const std::string& text : {std::string(), good.substr(1), good + "00", bad_char, std::string(256, '0')})
    EXPECT_THROW(TcpBootstrap::id_from_string(text), InvalidArgument) << "accepted '" << text << "'";
}

TEST(TcpUniqueId, BadArgumentsRejected) {
  EXPECT_THROW(TcpBootstrap::create_unique_id("127.0.0.1", -1), InvalidArgument);
  EXPECT_THROW(TcpBootstrap::create_unique_id("127.0.0.1", 65536), InvalidArgument);
  EXPECT_THROW(TcpBootstrap::create_unique_id(std::string(200, 'a'), 5000), InvalidArgument);
  EXPECT_THROW(TcpBootstrap(TcpUniqueId{}, 0, 2), InvalidArgument);  // all zeros is no id
}

TEST(TcpUniqueId, EnvironmentAddressIsUsed) {
  // 192.0.2.1 (TEST-NET-1) is not an address of this machine: binding it must fail.
  ::setenv("FERRY_BOOTSTRAP_ADDR", "192.0.2.1", 1);
  auto error = [] {
    try {
      TcpBootstrap::create_unique_id();
    } catch (...) {
      return std::current_exception();
    }
    return std::exception_ptr();
  }();
  ::unsetenv("FERRY_BOOTSTRAP_ADDR");
  EXPECT_TRUE(threw<BootstrapError>(error, "192.0.2.1"));
}

// ---------------------------------------------------------------- arguments
TEST(TcpBootstrap, ConstructorValidatesArguments) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id("127.0.0.1", 5000);
  EXPECT_THROW(TcpBootstrap(id, -1, 2), InvalidArgument);
  EXPECT_THROW(TcpBootstrap(id, 2, 2), InvalidArgument);
  EXPECT_THROW(TcpBootstrap(id, 0, 0), InvalidArgument);
  EXPECT_THROW(TcpBootstrap(id, 0, 1, with_timeout(0ms)), InvalidArgument);
}

TEST(TcpBootstrap, SingleRankCopiesAndChecksArguments) {
  TcpBootstrapOptions options;
  options.max_frame_bytes = 64;
  TcpBootstrap boot(TcpBootstrap::create_unique_id(), 0, 1, options);
  check_all_gather(boot, 0, 17);
  boot.barrier();
  std::vector<uint8_t> big(65);
  EXPECT_THROW(boot.all_gather(big.data(), big.data(), big.size()), InvalidArgument);
  EXPECT_THROW(boot.all_gather(nullptr, big.data(), 4), InvalidArgument);
  boot.all_gather(nullptr, nullptr, 0);  // zero bytes: nothing to point at
}

// ---------------------------------------------------------------- working groups
class TcpGroup : public ::testing::TestWithParam<int> {};

TEST_P(TcpGroup, AllGatherContentsAndBarrier) {
  const int ranks = GetParam();
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  expect_no_errors(run_ranks(ranks, [&](int rank) {
    TcpBootstrap boot(id, rank, ranks, with_timeout(10s));
    EXPECT_EQ(boot.rank(), rank);
    EXPECT_EQ(boot.size(), ranks);
    int round = 0;
    // 0 bytes is legal: nothing is exchanged but the ranks still synchronize.
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, (size_t{1} << 20) + 7})
      check_all_gather(boot, round++, bytes);
    boot.barrier();
    // In place: the contribution already sits in this rank's slot.
    std::vector<uint8_t> result(static_cast<size_t>(ranks) * 64);
    const auto mine = contribution(rank, 99, 64);
    std::copy(mine.begin(), mine.end(), result.begin() + rank * 64);
    boot.all_gather(result.data() + rank * 64, result.data(), 64);
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(result[static_cast<size_t>(r) * 64], contribution(r, 99, 64)[0]);
    EXPECT_EQ(boot.all_gather_value(rank * 10), [&] {
      std::vector<int> v;
      for (int r = 0; r < ranks; ++r) v.push_back(r * 10);
      return v;
    }());
  }));
}

TEST_P(TcpGroup, HundredRounds) {
  const int ranks = GetParam();
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  expect_no_errors(run_ranks(ranks, [&](int rank) {
    TcpBootstrap boot(id, rank, ranks, with_timeout(10s));
    for (int round = 0; round < 100; ++round) {
      check_all_gather(boot, round, static_cast<size_t>(round % 17) * 13);
      boot.barrier();
    }
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpGroup, ::testing::Values(2, 3, 5));

TEST(TcpBootstrap, ExplicitPortAndProbeConnectionIgnored) {
  const int port = free_port();
  const TcpUniqueId id = TcpBootstrap::create_unique_id("127.0.0.1", port);
  expect_no_errors(run_ranks(3, [&](int rank) {
    if (rank == 2) {  // a port probe: connects and leaves without a word, before rank 1 joins
      ::close(raw_connect(port));
      return;
    }
    if (rank == 1) std::this_thread::sleep_for(100ms);
    TcpBootstrap boot(id, rank, 2, with_timeout(5s));
    check_all_gather(boot, 0, 32);
  }));
}

// ---------------------------------------------------------------- missing peers
TEST(TcpBootstrap, MissingRankTimesOutNamingIt) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  const auto start = Clock::now();
  auto errors = run_ranks(2, [&](int rank) { TcpBootstrap boot(id, rank, 3, with_timeout(500ms)); });
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(threw<TimeoutError>(errors[0], "waiting for rank 2 to connect"));
  EXPECT_TRUE(threw<TimeoutError>(errors[1], "waiting for rank 2 to connect"))
      << "the root tells members who is missing";
}

TEST(TcpBootstrap, NoRootTimesOut) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id("127.0.0.1", free_port());
  const auto start = Clock::now();
  auto errors = run_ranks(1, [&](int) { TcpBootstrap boot(id, 1, 2, with_timeout(300ms)); });
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(threw<TimeoutError>(errors[0], "connecting to rank 0"));
}

TEST(TcpBootstrap, SilentRankInAllGatherTimesOut) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  std::atomic<int> finished{0};
  auto errors = run_ranks(3, [&](int rank) {
    TcpBootstrap boot(id, rank, 3, with_timeout(500ms));
    if (rank == 2) {  // joins the group but never takes part in the collective
      while (finished.load() < 2) std::this_thread::sleep_for(5ms);
      return;
    }
    struct Done {
      std::atomic<int>& n;
      ~Done() { ++n; }
    } done{finished};
    check_all_gather(boot, 0, 8);
  });
  EXPECT_TRUE(threw<TimeoutError>(errors[0], "waiting for rank 2 to send"));
  EXPECT_TRUE(threw<TimeoutError>(errors[1], "rank 2"));
  EXPECT_FALSE(errors[2]);
}

TEST(TcpBootstrap, RootGoneIsAnErrorNotAHang) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  const auto start = Clock::now();
  auto errors = run_ranks(2, [&](int rank) {
    TcpBootstrap boot(id, rank, 2, with_timeout(5s));
    if (rank == 1) check_all_gather(boot, 0, 8);  // the root leaves without gathering
  });
  EXPECT_LT(Clock::now() - start, 3s) << "EOF must be reported at once, not at the timeout";
  EXPECT_FALSE(errors[0]);
  EXPECT_TRUE(threw<BootstrapError>(errors[1], "rank 0"));
}

// ---------------------------------------------------------------- bad peers
// The root of a 2-rank group on `port` while `peer` plays rank 1 over a raw socket.
std::exception_ptr root_against_raw_peer(const std::function<void(int fd)>& peer) {
  const int port = free_port();
  const TcpUniqueId id = TcpBootstrap::create_unique_id("127.0.0.1", port);
  auto errors = run_ranks(2, [&](int rank) {
    if (rank == 0) {
      TcpBootstrap boot(id, 0, 2, with_timeout(1500ms));
      return;
    }
    int fd = raw_connect(port);
    peer(fd);
    ::close(fd);
  });
  return errors[0];
}

void send_header(int fd, uint32_t magic, uint64_t length) {
  const WireHeader header{magic, kWireHello, 1, 0, length};
  ASSERT_EQ(::send(fd, &header, sizeof header, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof header));
}

TEST(TcpBootstrap, BadMagicRejected) {
  auto start = Clock::now();
  auto error = root_against_raw_peer([](int fd) {
    send_header(fd, 0xDEADBEEF, 16);
    std::this_thread::sleep_for(300ms);  // stay connected while the root judges the frame
  });
  EXPECT_TRUE(threw<BootstrapError>(error, "malformed frame from peer 127.0.0.1"));
  EXPECT_TRUE(threw<BootstrapError>(error, "bad magic"));
  EXPECT_LT(Clock::now() - start, 1400ms) << "rejected at once, not at the timeout";
}

TEST(TcpBootstrap, OversizedLengthRejected) {
  auto error = root_against_raw_peer([](int fd) {
    send_header(fd, kWireMagic, uint64_t{1} << 40);
    std::this_thread::sleep_for(300ms);
  });
  EXPECT_TRUE(threw<BootstrapError>(error, "exceeds max_frame_bytes"));
}

TEST(TcpBootstrap, SilentPeerTimesOutNamingTheRank) {
  auto error = root_against_raw_peer([](int) { std::this_thread::sleep_for(2000ms); });
  EXPECT_TRUE(threw<TimeoutError>(error, "waiting for rank 1 to connect"));
}

TEST(TcpBootstrap, TruncatedHelloRejected) {
  auto error = root_against_raw_peer([](int fd) {
    const uint32_t magic = kWireMagic;
    ASSERT_EQ(::send(fd, &magic, sizeof magic, MSG_NOSIGNAL), 4);
  });
  EXPECT_TRUE(threw<BootstrapError>(error, "closed the connection in the middle of a frame"));
}

TEST(TcpBootstrap, DuplicateRankRejected) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  auto errors = run_ranks(3, [&](int rank) { TcpBootstrap boot(id, rank == 2 ? 1 : rank, 3, with_timeout(2s)); });
  // The second claim of rank 1 is turned away; rank 2 never comes, so the root's
  // timeout names it and mentions the rejected duplicate.
  EXPECT_TRUE(threw<TimeoutError>(errors[0], "waiting for rank 2 to connect"));
  EXPECT_TRUE(threw<TimeoutError>(errors[0], "duplicate rank 1"));
  EXPECT_TRUE(errors[1] && errors[2]) << "both ranks claiming 1 must fail";
  const bool loser_told = threw<BootstrapError>(errors[1], "duplicate rank 1") ||
                          threw<BootstrapError>(errors[2], "duplicate rank 1");
  EXPECT_TRUE(loser_told) << "the turned-away rank learns why";
}

TEST(TcpBootstrap, ForeignIdRejected) {
  const int port = free_port();
  const TcpUniqueId ours = TcpBootstrap::create_unique_id("127.0.0.1", port);
  const TcpUniqueId theirs = TcpBootstrap::create_unique_id("127.0.0.1", port);  // same place, other group
  auto errors =
      run_ranks(2, [&](int rank) { TcpBootstrap boot(rank == 0 ? ours : theirs, rank, 2, with_timeout(2s)); });
  EXPECT_TRUE(threw<BootstrapError>(errors[0], "different unique id"));
  EXPECT_TRUE(threw<BootstrapError>(errors[1], "root reported"));
}

TEST(TcpBootstrap, SizeMismatchAndRankOutOfRangeRejected) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  auto errors = run_ranks(2, [&](int rank) { TcpBootstrap boot(id, rank, rank == 0 ? 2 : 3, with_timeout(2s)); });
  EXPECT_TRUE(threw<BootstrapError>(errors[0], "claims rank 1) was created with size 3"));
  EXPECT_TRUE(threw<BootstrapError>(errors[1], "root reported"));

  const TcpUniqueId id2 = TcpBootstrap::create_unique_id();
  errors =
      run_ranks(2, [&](int rank) { TcpBootstrap boot(id2, rank == 0 ? 0 : 4, rank == 0 ? 2 : 5, with_timeout(2s)); });
  EXPECT_TRUE(threw<BootstrapError>(errors[0], "rank 4 out of range"));
}

TEST(TcpBootstrap, MismatchedBytesPerRankThenUnusable) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  std::vector<std::exception_ptr> second(2);
  auto errors = run_ranks(2, [&](int rank) {
    TcpBootstrap boot(id, rank, 2, with_timeout(2s));
    struct Retry {  // whatever the first call did, a second call must refuse
      TcpBootstrap& boot;
      std::exception_ptr& out;
      ~Retry() {
        try {
          boot.barrier();
        } catch (...) {
          out = std::current_exception();
        }
      }
    } retry{boot, second[static_cast<size_t>(rank)]};
    check_all_gather(boot, 0, rank == 0 ? 8 : 16);
  });
  EXPECT_TRUE(threw<BootstrapError>(errors[0], "malformed frame from rank 1: length 16, expected 8"));
  EXPECT_TRUE(threw<BootstrapError>(errors[1], "root reported"));
  EXPECT_TRUE(threw<BootstrapError>(second[0], "unusable"));
  EXPECT_TRUE(threw<BootstrapError>(second[1], "unusable"));
}

// ---------------------------------------------------------------- CallbackBootstrap
TEST(CallbackBootstrap, ForwardsCalls) {
  int gathers = 0, barriers = 0;
  size_t seen_bytes = 0;
  CallbackBootstrap boot(
      1, 2,
      [&](const void* send, void* recv, size_t bytes) {
        ++gathers;
        seen_bytes = bytes;
        std::memcpy(static_cast<char*>(recv) + bytes, send, bytes);  // pretend to be rank 1 of 2
      },
      [&] { ++barriers; });
  EXPECT_EQ(boot.rank(), 1);
  EXPECT_EQ(boot.size(), 2);
  auto values = boot.all_gather_value(42);
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(seen_bytes, sizeof(int));
  EXPECT_EQ(values[1], 42);
  boot.barrier();
  EXPECT_EQ(barriers, 1);
}

TEST(CallbackBootstrap, ValidatesArguments) {
  auto gather = [](const void*, void*, size_t) {};
  auto barrier = [] {};
  EXPECT_THROW(CallbackBootstrap(0, 0, gather, barrier), InvalidArgument);
  EXPECT_THROW(CallbackBootstrap(2, 2, gather, barrier), InvalidArgument);
  EXPECT_THROW(CallbackBootstrap(-1, 2, gather, barrier), InvalidArgument);
  EXPECT_THROW(CallbackBootstrap(0, 2, nullptr, barrier), InvalidArgument);
  EXPECT_THROW(CallbackBootstrap(0, 2, gather, nullptr), InvalidArgument);
  CallbackBootstrap boot(0, 2, gather, barrier);
  EXPECT_THROW(boot.all_gather(nullptr, nullptr, 4), InvalidArgument);
}

}  // namespace
}  // namespace ferry
