// TcpBootstrap's root (MPI rank 0) against malformed frames sent from another
// process (MPI rank 1) while real members wait in the group (NOTE [TCP bootstrap
// frames] in src/bootstrap/tcp_bootstrap.cpp): one case per malformed kind, then
// random bytes for FERRY_FUZZ_SECONDS (default 5; seed FERRY_FUZZ_SEED), then the
// real ranks. Needs 2 or more MPI ranks; ctest runs it as mp_tcp_bootstrap_fuzz_np2.
#include <dirent.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/tcp_util.hpp"
#include "common/test_util.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

using namespace std::chrono_literals;
using namespace ::ferry::testing;
using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

constexpr uint32_t kWireAbort = 5;  // frame kind of the root's abort message

// Every test needs an MPI rank besides the root's.
class TwoOrMoreProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mpi_size() < 2) GTEST_SKIP() << "needs 2 or more MPI ranks";
  }
};
using TcpBootstrapFramesAcrossProcesses = TwoOrMoreProcesses;
using TcpBootstrapFuzzAcrossProcesses = TwoOrMoreProcesses;

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

TcpUniqueId broadcast_new_id() {
  TcpUniqueId id;
  if (mpi_rank() == 0) id = TcpBootstrap::create_unique_id("127.0.0.1", 0);
  MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  return id;
}

Bytes frame(uint32_t magic, uint32_t kind, int32_t sender, uint64_t length, const void* payload = nullptr,
            size_t payload_bytes = 0) {
  const WireHeader header{magic, kind, sender, 0, length};
  Bytes out(sizeof header + payload_bytes);
  std::memcpy(out.data(), &header, sizeof header);
  if (payload_bytes > 0) std::memcpy(out.data() + sizeof header, payload, payload_bytes);
  return out;
}

// A correct hello for `sender`; the cases below change one thing in it.
WireHello good_hello(const TcpUniqueId& id, int group) { return {id_magic(id), group, kWireVersion}; }
Bytes hello_frame(int32_t sender, const WireHello& hello) {
  return frame(kWireMagic, kWireHello, sender, sizeof hello, &hello, sizeof hello);
}

// Joins `id` as `rank` and checks one all_gather; "" when all went well.
std::string join_and_gather(const TcpUniqueId& id, int rank, int group, std::chrono::milliseconds timeout) {
  try {
    TcpBootstrap boot(id, rank, group, with_timeout(timeout));
    const std::vector<int> got = boot.all_gather_value(rank * 7 + 1);
    for (int r = 0; r < group; ++r)
      if (got[static_cast<size_t>(r)] != r * 7 + 1) return "all_gather slot " + std::to_string(r) + " is wrong";
    return "";
  } catch (const std::exception& e) {
    return std::string("failed: ") + e.what();
  }
}

// The abort frame the root sends a rejected peer: its text, or "" if none came.
std::string read_abort(int fd) {
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  WireHeader h{};
  if (::recv(fd, &h, sizeof h, MSG_WAITALL) != static_cast<ssize_t>(sizeof h)) return "";
  if (h.magic != kWireMagic || h.kind != kWireAbort || h.length < 4 || h.length > 16384) return "";
  std::string text(h.length, '\0');
  if (::recv(fd, text.data(), text.size(), MSG_WAITALL) != static_cast<ssize_t>(text.size())) return "";
  return text.substr(4);  // after the "is a timeout" flag
}

// ---------------------------------------------------------------- one case per kind
// The group has mpi_size() + 1 ranks: MPI rank r joins as rank r, and a helper
// thread of MPI rank 1 plays the intruder once they are in (after `kSettle`), then,
// when the group is expected to survive, joins as the last rank.
struct Case {
  // Returns "" or what went wrong on the intruder's side.
  std::function<std::string(const TcpUniqueId& id, int group, int port)> intruder;
  std::string verdict;   // "": the group forms; else in the root's error and every member's
  bool timeout = false;  // the verdict is a TimeoutError rather than a BootstrapError
};
constexpr auto kSettle = 250ms;

// A raw peer sends `make(id, group)`; with `told`, it then expects the root's
// abort frame naming `needle`. The socket is closed at the end either way.
Case raw(std::function<Bytes(const TcpUniqueId&, int)> make, std::string needle, bool told = true) {
  Case c;
  c.verdict = needle;
  c.intruder = [make, needle, told](const TcpUniqueId& id, int group, int port) -> std::string {
    const int fd = raw_connect(port);
    if (fd < 0) return "cannot connect to the root";
    const Bytes bytes = make(id, group);
    if (!bytes.empty()) (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string problem;
    if (told) {
      const std::string heard = read_abort(fd);
      if (heard.find(needle) == std::string::npos) problem = "the rejected peer was not told why; it heard: " + heard;
    }
    ::close(fd);
    return problem;
  };
  return c;
}

// Runs `c` on every rank; true on every rank when everybody saw what `c` expects.
bool run_case(const Case& c, std::chrono::milliseconds timeout = 5s) {
  const TcpUniqueId id = broadcast_new_id();
  const int group = mpi_size() + 1;
  std::string helper_problem;
  std::thread helper;
  MPI_Barrier(MPI_COMM_WORLD);
  if (mpi_rank() == 1) {
    helper = std::thread([&] {
      std::this_thread::sleep_for(kSettle);  // the members are in by then
      helper_problem = c.intruder(id, group, id_port(id));
      if (helper_problem.empty() && c.verdict.empty()) helper_problem = join_and_gather(id, group - 1, group, timeout);
    });
  }
  const auto start = Clock::now();
  std::string problem;
  if (c.verdict.empty()) {
    problem = join_and_gather(id, mpi_rank(), group, timeout);
  } else {
    try {
      TcpBootstrap boot(id, mpi_rank(), group, with_timeout(timeout));
      problem = "the group formed";
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool right_type = (dynamic_cast<const TimeoutError*>(&e) != nullptr) == c.timeout;
      if (!right_type || what.find(c.verdict) == std::string::npos)
        problem = "wrong error: " + what;
      else if (mpi_rank() != 0 && what.find("root reported") == std::string::npos)
        problem = "the member did not get the root's verdict: " + what;
      else if (ms_since(start) > (c.timeout ? timeout.count() + 1000 : timeout.count() / 2))
        problem = "the verdict took " + std::to_string(ms_since(start)) + " ms";
    }
  }
  if (helper.joinable()) helper.join();
  if (!problem.empty()) ADD_FAILURE() << "rank " << mpi_rank() << ": " << problem;
  if (!helper_problem.empty()) ADD_FAILURE() << "intruder (MPI rank 1): " << helper_problem;
  return all_ranks(problem.empty() && helper_problem.empty());
}

TEST_F(TcpBootstrapFramesAcrossProcesses, TruncatedHeaderFailsTheGroup) {
  EXPECT_TRUE(run_case(raw(
      [](const TcpUniqueId& id, int group) {
        Bytes b = hello_frame(1, good_hello(id, group));
        b.resize(10);
        return b;
      },
      "closed the connection in the middle of a frame", false)));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, TruncatedPayloadFailsTheGroup) {
  EXPECT_TRUE(run_case(raw(
      [](const TcpUniqueId& id, int group) {
        Bytes b = hello_frame(group - 1, good_hello(id, group));
        b.resize(sizeof(WireHeader) + 8);
        return b;
      },
      "closed the connection in the middle of a frame", false)));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, StalledMidFrameIsNamedAtTheTimeout) {
  Case c;
  c.verdict = "sent 10 of the 40 bytes of a hello, then nothing";
  c.timeout = true;
  c.intruder = [](const TcpUniqueId& id, int group, int port) -> std::string {
    const int fd = raw_connect(port);
    if (fd < 0) return "cannot connect to the root";
    const Bytes b = hello_frame(group - 1, good_hello(id, group));
    (void)::send(fd, b.data(), 10, MSG_NOSIGNAL);
    char byte;
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)::recv(fd, &byte, 1, 0);  // until the root gives up and hangs up
    ::close(fd);
    return "";
  };
  EXPECT_TRUE(run_case(c, 1000ms));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, OversizedLengthFailsTheGroup) {
  EXPECT_TRUE(run_case(
      raw([](const TcpUniqueId&, int group) { return frame(kWireMagic, kWireHello, group - 1, uint64_t{1} << 40); },
          "length 1099511627776 exceeds max_frame_bytes")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, WrongHelloLengthFailsTheGroup) {
  EXPECT_TRUE(run_case(raw(
      [](const TcpUniqueId& id, int group) {
        const WireHello hello = good_hello(id, group);
        return frame(kWireMagic, kWireHello, group - 1, 24, &hello, sizeof hello);
      },
      "length 24, expected 16 (a hello is 16 bytes")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, WrongMagicFailsTheGroup) {
  // "HTTP/1.1" where the magic and kind go, as a stray web client would send.
  EXPECT_TRUE(run_case(
      raw([](const TcpUniqueId&, int) { return frame(0x50545448u, 0x2f312e31u, 0, 0); }, "bad magic 0x50545448")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, WrongKindFailsTheGroup) {
  EXPECT_TRUE(run_case(
      raw([](const TcpUniqueId&, int group) { return frame(kWireMagic, 4, group - 1, 16); }, "kind 4, expected 1")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, RankOutOfRangeFailsTheGroup) {
  EXPECT_TRUE(run_case(
      raw([](const TcpUniqueId& id, int group) { return hello_frame(group, good_hello(id, group)); },
          "rank " + std::to_string(mpi_size() + 1) + " out of range [1, " + std::to_string(mpi_size() + 1) + ")")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, WrongVersionFailsTheGroup) {
  EXPECT_TRUE(run_case(raw(
      [](const TcpUniqueId& id, int group) {
        WireHello hello = good_hello(id, group);
        hello.version = kWireVersion + 1;
        return hello_frame(group - 1, hello);
      },
      "speaks bootstrap protocol version 2, rank 0 speaks version 1")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, AnotherGroupsIdFailsTheGroup) {
  EXPECT_TRUE(run_case(raw(
      [](const TcpUniqueId& id, int group) {
        WireHello hello = good_hello(id, group);
        hello.id_magic ^= 1;
        return hello_frame(group - 1, hello);
      },
      "holds a different unique id")));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, WrongWorldSizeFailsTheGroup) {
  const int group = mpi_size() + 1;
  EXPECT_TRUE(run_case(
      raw([](const TcpUniqueId& id, int g) { return hello_frame(g - 1, good_hello(id, g + 1)); },
          "was created with size " + std::to_string(group + 1) + ", rank 0 with size " + std::to_string(group))));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, SilentProbeIsIgnored) {
  EXPECT_TRUE(run_case(raw([](const TcpUniqueId&, int) { return Bytes{}; }, "", false)));
}

TEST_F(TcpBootstrapFramesAcrossProcesses, DuplicateRankIsTurnedAwayAndTheGroupForms) {
  Case c;
  c.intruder = [](const TcpUniqueId& id, int group, int) -> std::string {
    try {
      TcpBootstrap boot(id, 1, group, with_timeout(3s));  // rank 1 is already in
      return "a second rank 1 was admitted";
    } catch (const BootstrapError& e) {
      const std::string what = e.what();
      if (what.find("root reported") != std::string::npos && what.find("duplicate rank 1") != std::string::npos &&
          what.find("turned away") != std::string::npos)
        return "";
      return std::string("unclear error: ") + e.what();
    } catch (const std::exception& e) {
      return std::string("wrong error: ") + e.what();
    }
  };
  EXPECT_TRUE(run_case(c));
}

// ---------------------------------------------------------------- fuzz
uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* env = std::getenv(name);
  return env && *env ? std::strtoull(env, nullptr, 0) : fallback;
}

// True when `b` starts with a hello the root would admit; the fuzzer never sends one.
bool starts_with_valid_hello(const Bytes& b, const TcpUniqueId& id, int group) {
  if (b.size() < sizeof(WireHeader) + sizeof(WireHello)) return false;
  WireHeader h;
  WireHello hello;
  std::memcpy(&h, b.data(), sizeof h);
  std::memcpy(&hello, b.data() + sizeof h, sizeof hello);
  return h.magic == kWireMagic && h.kind == kWireHello && h.sender >= 1 && h.sender < group &&
         h.length == sizeof hello && hello.version == kWireVersion && hello.id_magic == id_magic(id) &&
         hello.world_size == group;
}

// Random bytes for one connection: noise; a hello header with random fields; a
// correct hello with one field (magic, kind, sender, length, id, size or version)
// made random or off by a little; a hello header over a random payload. A third
// are cut short anywhere. Never empty (empty means a silent probe).
Bytes fuzz_bytes(std::mt19937_64& gen, const TcpUniqueId& id, int group) {
  auto pick = [&](uint64_t n) { return gen() % n; };
  struct Field {
    size_t offset, width;
  };
  static constexpr Field kFields[] = {{0, 4}, {4, 4}, {8, 4}, {16, 8}, {24, 8}, {32, 4}, {36, 4}};  // not `reserved`
  Bytes out;
  switch (pick(5)) {
    case 0:
      out.resize(1 + pick(pick(2) ? 64 : 4096));
      for (auto& b : out) b = static_cast<uint8_t>(gen());
      break;
    case 1: {
      const uint64_t length = pick(3) == 0 ? gen() : pick(3) == 0 ? sizeof(WireHello) : pick(64);
      out = frame(kWireMagic, static_cast<uint32_t>(pick(7)), static_cast<int32_t>(pick(group + 2)) - 1, length);
      break;
    }
    case 2:
    case 3: {
      out = hello_frame(static_cast<int32_t>(1 + pick(group - 1)), good_hello(id, group));
      const Field f = kFields[pick(std::size(kFields))];
      uint64_t value = 0;
      std::memcpy(&value, out.data() + f.offset, f.width);
      value = pick(2) ? gen() : value + 1 + pick(3) - (pick(2) ? 4 : 0);
      std::memcpy(out.data() + f.offset, &value, f.width);  // little-endian: the low bytes
      break;
    }
    default: {
      out = frame(kWireMagic, kWireHello, static_cast<int32_t>(pick(group + 1)), sizeof(WireHello));
      for (uint64_t n = pick(48); n > 0; --n) out.push_back(static_cast<uint8_t>(gen()));
      break;
    }
  }
  if (starts_with_valid_hello(out, id, group)) out[sizeof(WireHeader)] ^= 1;  // a wrong id
  if (pick(3) == 0) out.resize(1 + pick(out.size()));
  return out;
}

// What the root's error says, in a word, for the summary.
std::string reason_of(const std::string& what) {
  for (const char* key :
       {"bad magic", "kind", "exceeds max_frame_bytes", "length", "out of range", "middle of a frame",
        "protocol version", "different unique id", "created with size", "closed the connection", "failed"})
    if (what.find(key) != std::string::npos) return key;
  return "other";
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir) != nullptr) ++n;
    ::closedir(dir);
  }
  return n;
}

// Each connection leaves a TIME_WAIT socket for a minute, and the ~28k ephemeral
// ports of the loopback are shared with the tests that run beside this one.
constexpr double kConnectionsPerSecond = 300;

// MPI's own waits spin a core; rounds travel point to point and are waited for
// with sleeps between polls, so the fuzz leaves the CPU to the tests beside it.
void wait_quietly(MPI_Request& request) {
  for (int done = 0; !done; std::this_thread::sleep_for(50us)) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
}
void send_to_others(void* data, size_t bytes, int tag) {
  for (int r = 1; r < mpi_size(); ++r) MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, r, tag, MPI_COMM_WORLD);
}
void recv_quietly(void* data, size_t bytes, int source, int tag) {
  MPI_Request request;
  MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, source, tag, MPI_COMM_WORLD, &request);
  wait_quietly(request);
}
enum Tag : int { kRoundTag = 1, kBytesTag, kResultTag };

// One fuzz round, decided on rank 0 and broadcast: up to 3 connections from MPI
// rank 1, each either silent (a probe) or random bytes. The root must fail with a
// BootstrapError naming a peer iff some connection sent bytes; otherwise every
// MPI rank joins and the group must work.
struct Round {
  int32_t stop = 0, connections = 0;
  uint32_t lengths[3] = {0, 0, 0};
  TcpUniqueId id;
};

TEST_F(TcpBootstrapFuzzAcrossProcesses, RandomBytesThenTheRealRanks) {
  const double seconds = std::atof(std::getenv("FERRY_FUZZ_SECONDS") ? std::getenv("FERRY_FUZZ_SECONDS") : "5");
  const uint64_t seed = env_u64("FERRY_FUZZ_SEED", 20261125);
  std::mt19937_64 gen(seed);
  const int group = mpi_size();
  const auto timeout = 2000ms;  // a safety net: every round ends with an EOF or a join
  const size_t fds_before = open_fds();
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long rounds = 0, connections = 0, probes = 0, failures = 0;
  std::map<std::string, long> reasons;
  for (;;) {
    Round round;
    Bytes all;
    if (mpi_rank() == 0) {
      const std::chrono::duration<double> pace(static_cast<double>(connections) / kConnectionsPerSecond);
      std::this_thread::sleep_until(std::min(end, start + std::chrono::duration_cast<Clock::duration>(pace)));
      round.stop = Clock::now() >= end || failures >= 5;
      round.id = round.stop ? TcpUniqueId{} : TcpBootstrap::create_unique_id("127.0.0.1", 0);
      round.connections = 1 + static_cast<int32_t>(gen() % 3);
      for (int i = 0; i < round.connections; ++i) {
        Bytes b = gen() % 8 == 0 || round.stop ? Bytes{} : fuzz_bytes(gen, round.id, group);
        round.lengths[i] = static_cast<uint32_t>(b.size());
        all.insert(all.end(), b.begin(), b.end());
      }
    }
    mpi_rank() == 0 ? send_to_others(&round, sizeof round, kRoundTag)
                    : recv_quietly(&round, sizeof round, 0, kRoundTag);
    if (round.stop) break;
    size_t total = 0;
    for (int i = 0; i < round.connections; ++i) total += round.lengths[i];
    all.resize(total);
    if (total > 0)
      mpi_rank() == 0 ? send_to_others(all.data(), total, kBytesTag) : recv_quietly(all.data(), total, 0, kBytesTag);
    const bool garbage = total > 0;
    ++rounds;
    connections += round.connections;
    for (int i = 0; i < round.connections; ++i) probes += round.lengths[i] == 0;
    if (mpi_rank() == 1) {  // the fuzzer: all connections open at once, then bytes, then close
      std::vector<int> fds;
      for (int i = 0; i < round.connections; ++i) fds.push_back(raw_connect(id_port(round.id)));
      for (size_t i = 0, at = 0; i < fds.size(); at += round.lengths[i++])
        if (fds[i] >= 0 && round.lengths[i] > 0) (void)::send(fds[i], all.data() + at, round.lengths[i], MSG_NOSIGNAL);
      for (int fd : fds)
        if (fd >= 0) ::close(fd);
    }
    std::string problem;
    if (mpi_rank() == 0 && garbage) {
      try {
        TcpBootstrap boot(round.id, 0, group, with_timeout(timeout));
        problem = "the root formed a group from random bytes";
      } catch (const BootstrapError& e) {
        const std::string what = e.what();
        if (what.find("TcpBootstrap: rank 0") == std::string::npos || what.find("peer 127.0.0.1:") == std::string::npos)
          problem = "the error names no peer: " + what;
        ++reasons[reason_of(what)];
      } catch (const std::exception& e) {
        problem = std::string("not a BootstrapError: ") + e.what();
      }
    } else if (!garbage) {
      problem = join_and_gather(round.id, mpi_rank(), group, timeout);  // probes only: the group forms
    }
    if (!problem.empty())
      ADD_FAILURE() << "rank " << mpi_rank() << ", round " << rounds << " (seed " << seed << "): " << problem;
    int failed = problem.empty() ? 0 : 1;
    if (mpi_rank() != 0) MPI_Send(&failed, 1, MPI_INT, 0, kResultTag, MPI_COMM_WORLD);
    for (int r = 1; r < mpi_size() && mpi_rank() == 0; ++r) {
      int theirs = 0;
      recv_quietly(&theirs, sizeof theirs, r, kResultTag);
      failed += theirs;
    }
    failures += failed;  // counted on rank 0, which stops the fuzz after 5
  }
  // The real ranks, after a probe, in a group of every MPI rank.
  const TcpUniqueId id = broadcast_new_id();
  if (mpi_rank() == 1) ::close(raw_connect(id_port(id)));
  const std::string problem = join_and_gather(id, mpi_rank(), group, 10s);
  EXPECT_EQ(problem, "") << "rank " << mpi_rank();
  const size_t fds_after = open_fds();
  EXPECT_LE(fds_after, fds_before + 2) << "rank " << mpi_rank() << " leaks file descriptors";
  if (mpi_rank() == 0) {
    std::string summary;
    for (const auto& [reason, n] : reasons) summary += " '" + reason + "' " + std::to_string(n);
    std::printf(
        "[ferry] tcp bootstrap fuzz across processes: seed %llu (FERRY_FUZZ_SEED repeats it), %.1f s: "
        "%ld rounds, %ld connections (%ld silent probes); root errors:%s\n",
        static_cast<unsigned long long>(seed), seconds, rounds, connections, probes, summary.c_str());
  }
  EXPECT_TRUE(all_ranks(problem.empty() && failures == 0 && rounds > 0));  // failures: rank 0 has them all
}

}  // namespace
}  // namespace ferry
