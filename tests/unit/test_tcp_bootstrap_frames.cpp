// The root of a TcpBootstrap against raw sockets that send malformed frames:
// truncated, oversized, wrong magic, kind or protocol version, a duplicate rank,
// and random bytes for a fixed time (FERRY_FUZZ_SECONDS, default 3). The root must
// answer every one with a BootstrapError (or TimeoutError) that names the problem,
// within its timeout, and never crash or hang.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/tcp_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using namespace ::ferry::testing;
using Clock = std::chrono::steady_clock;

void send_all(int fd, const void* data, size_t n) {
  // MSG_NOSIGNAL: the root may already have hung up; that must not kill the test.
  ASSERT_EQ(::send(fd, data, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}

std::vector<uint8_t> hello_frame(const TcpUniqueId& id, int sender, int world_size, uint32_t version) {
  const WireHeader header{kWireMagic, kWireHello, sender, 0, sizeof(WireHello)};
  const WireHello hello{id_magic(id), world_size, version};
  std::vector<uint8_t> frame(sizeof header + sizeof hello);
  std::memcpy(frame.data(), &header, sizeof header);
  std::memcpy(frame.data() + sizeof header, &hello, sizeof hello);
  return frame;
}

struct Outcome {
  std::exception_ptr error;
  Clock::duration took;
};

// Rank 0 of a 2-rank group (port 0 id, so no port races) while `peer` plays
// rank 1 over a raw socket and then closes it.
Outcome root_against(const std::function<void(int fd, const TcpUniqueId& id)>& peer,
                     TcpBootstrapOptions options = with_timeout(2s)) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  const auto start = Clock::now();
  auto root = std::async(std::launch::async, [&] { TcpBootstrap boot(id, 0, 2, options); });
  const int fd = raw_connect(id_port(id));
  EXPECT_GE(fd, 0);
  if (fd >= 0) {
    peer(fd, id);
    ::close(fd);
  }
  Outcome out;
  try {
    root.get();
  } catch (...) {
    out.error = std::current_exception();
  }
  out.took = Clock::now() - start;
  return out;
}

// The peer sends `bytes`, then waits a moment so the root judges the bytes
// rather than the hang-up that follows.
std::function<void(int, const TcpUniqueId&)> sends(std::vector<uint8_t> bytes, bool linger = true) {
  return [bytes, linger](int fd, const TcpUniqueId&) {
    send_all(fd, bytes.data(), bytes.size());
    if (linger) std::this_thread::sleep_for(200ms);
  };
}

std::vector<uint8_t> header_bytes(uint32_t magic, uint32_t kind, int32_t sender, uint64_t length) {
  const WireHeader header{magic, kind, sender, 0, length};
  std::vector<uint8_t> out(sizeof header);
  std::memcpy(out.data(), &header, sizeof header);
  return out;
}

TEST(TcpBootstrapFrames, TruncatedHeader) {
  auto bytes = header_bytes(kWireMagic, kWireHello, 1, sizeof(WireHello));
  bytes.resize(10);
  const Outcome out = root_against(sends(bytes, false));
  EXPECT_TRUE(threw<BootstrapError>(out.error, "closed the connection in the middle of a frame"));
  EXPECT_LT(out.took, 1500ms) << "EOF is reported at once, not at the timeout";
}

TEST(TcpBootstrapFrames, TruncatedPayload) {
  const Outcome out = root_against([](int fd, const TcpUniqueId& id) {
    auto frame = hello_frame(id, 1, 2, kWireVersion);
    frame.resize(sizeof(WireHeader) + 8);  // half the hello
    send_all(fd, frame.data(), frame.size());
  });
  EXPECT_TRUE(threw<BootstrapError>(out.error, "closed the connection in the middle of a frame"));
  EXPECT_LT(out.took, 1500ms);
}

TEST(TcpBootstrapFrames, OversizedLength) {
  TcpBootstrapOptions options = with_timeout(2s);
  options.max_frame_bytes = 4096;
  const Outcome out = root_against(sends(header_bytes(kWireMagic, kWireHello, 1, 4097)), options);
  EXPECT_TRUE(threw<BootstrapError>(out.error, "length 4097 exceeds max_frame_bytes 4096"));
  EXPECT_LT(out.took, 1500ms);
}

TEST(TcpBootstrapFrames, WrongMagic) {
  const Outcome out = root_against(sends(header_bytes(0xDEADBEEF, kWireHello, 1, sizeof(WireHello))));
  EXPECT_TRUE(threw<BootstrapError>(out.error, "bad magic 0xdeadbeef"));
  EXPECT_LT(out.took, 1500ms);
}

TEST(TcpBootstrapFrames, WrongKind) {
  const Outcome out = root_against(sends(header_bytes(kWireMagic, 3, 1, sizeof(WireHello))));
  EXPECT_TRUE(threw<BootstrapError>(out.error, "kind 3, expected 1"));
}

TEST(TcpBootstrapFrames, WrongProtocolVersion) {
  const Outcome out = root_against([](int fd, const TcpUniqueId& id) {
    const auto frame = hello_frame(id, 1, 2, kWireVersion + 6);
    send_all(fd, frame.data(), frame.size());
    std::this_thread::sleep_for(200ms);
  });
  EXPECT_TRUE(threw<BootstrapError>(out.error, "speaks bootstrap protocol version 7, rank 0 speaks version 1"));
  EXPECT_LT(out.took, 1500ms);
}

TEST(TcpBootstrapFrames, ValidRawHelloIsAccepted) {
  // The control for the cases above: the same raw peer with a correct hello joins.
  const Outcome out = root_against([](int fd, const TcpUniqueId& id) {
    const auto frame = hello_frame(id, 1, 2, kWireVersion);
    send_all(fd, frame.data(), frame.size());
    WireHeader ready{};
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    EXPECT_EQ(::recv(fd, &ready, sizeof ready, MSG_WAITALL), static_cast<ssize_t>(sizeof ready));
    EXPECT_EQ(ready.magic, kWireMagic);
  });
  EXPECT_FALSE(out.error);
}

// A second connection claiming rank 1 while rank 1 is already in: the intruder is
// told why and turned away, and the group still forms and works.
TEST(TcpBootstrapFrames, DuplicateRankIntruderTurnedAway) {
  const TcpUniqueId id = TcpBootstrap::create_unique_id();
  std::atomic<bool> intruder_done{false};
  std::string intruder_heard;
  std::vector<std::exception_ptr> errors(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        if (rank == 2)
          while (!intruder_done) std::this_thread::sleep_for(5ms);  // join only after the intruder
        TcpBootstrap boot(id, rank, 3, with_timeout(3s));
        boot.barrier();
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  std::this_thread::sleep_for(500ms);  // rank 1 has joined by now
  const int fd = raw_connect(id_port(id));
  ASSERT_GE(fd, 0);
  const auto frame = hello_frame(id, 1, 3, kWireVersion);
  send_all(fd, frame.data(), frame.size());
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  WireHeader abort{};
  if (::recv(fd, &abort, sizeof abort, MSG_WAITALL) == static_cast<ssize_t>(sizeof abort) && abort.length < 16384) {
    std::string text(abort.length, '\0');
    if (::recv(fd, text.data(), text.size(), MSG_WAITALL) == static_cast<ssize_t>(text.size())) intruder_heard = text;
  }
  ::close(fd);
  intruder_done = true;
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_FALSE(errors[r]) << "rank " << r << " failed; the group must survive an intruder";
  EXPECT_NE(intruder_heard.find("duplicate rank 1"), std::string::npos) << "intruder heard: " << intruder_heard;
}

// ---------------------------------------------------------------- fuzz
// Random bytes in three shapes: pure noise; a correct hello header followed by a
// noisy payload; the frame magic followed by noisy kind, sender and length fields.
// Each is cut at a random length (0..4096 bytes of noise) and the socket closed.
std::vector<uint8_t> fuzz_bytes(std::mt19937_64& gen) {
  std::uniform_int_distribution<size_t> len(0, 4096);
  std::vector<uint8_t> out(len(gen));
  for (auto& b : out) b = static_cast<uint8_t>(gen());
  switch (gen() % 3) {
    case 0:
      break;
    case 1: {
      const auto header = header_bytes(kWireMagic, kWireHello, static_cast<int32_t>(gen() % 4), sizeof(WireHello));
      out.insert(out.begin(), header.begin(), header.end());
      break;
    }
    default: {
      // Small lengths half the time, so that length checks other than the cap run too.
      const uint64_t length = gen() % 2 ? gen() % 64 : gen();
      const auto header =
          header_bytes(kWireMagic, static_cast<uint32_t>(gen() % 8), static_cast<int32_t>(gen()), length);
      out.insert(out.begin(), header.begin(), header.end());
      break;
    }
  }
  out.resize(std::uniform_int_distribution<size_t>(0, out.size())(gen));  // truncate anywhere
  return out;
}

TEST(TcpBootstrapFuzz, RandomBytesNeverCrashOrHang) {
  const char* env = std::getenv("FERRY_FUZZ_SECONDS");
  const double seconds = env && *env ? std::atof(env) : 3.0;
  const auto timeout = 300ms;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 gen(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long iterations = 0, rejected = 0, timed_out = 0;
  while (Clock::now() < end) {
    const TcpUniqueId id = TcpBootstrap::create_unique_id();
    auto root = std::async(std::launch::async, [&] { TcpBootstrap boot(id, 0, 2, with_timeout(timeout)); });
    const auto bytes = fuzz_bytes(gen);
    const int fd = raw_connect(id_port(id));
    ASSERT_GE(fd, 0);
    // The root may hang up mid-send; MSG_NOSIGNAL turns that into an ignored error.
    if (!bytes.empty()) (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::close(fd);
    // 2x the timeout plus scheduling slack; a root stuck past that is a hang.
    ASSERT_EQ(root.wait_for(2 * timeout + 200ms), std::future_status::ready)
        << "root hung on " << bytes.size() << " fuzz bytes";
    ++iterations;
    try {
      root.get();
      ADD_FAILURE() << "root accepted " << bytes.size() << " random bytes as a member";
    } catch (const BootstrapError&) {
      ++rejected;
    } catch (const TimeoutError&) {
      ++timed_out;  // e.g. no bytes at all: a port probe, so the root keeps waiting
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception type: " << e.what();
    }
  }
  std::printf("[ferry] tcp bootstrap fuzz: %ld iterations, %ld rejected (%ld timed out, seed %llu)\n", iterations,
              rejected, timed_out, static_cast<unsigned long long>(seed));
  EXPECT_GT(iterations, 0);
}

}  // namespace
}  // namespace ferry
