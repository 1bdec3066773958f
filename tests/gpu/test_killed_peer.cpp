// Killed peers (issue 15): a rank killed with SIGKILL in the middle of an
// AllReduce (every algorithm), an EP dispatch or an EP combine (both modes), on
// one node and across virtual nodes, makes every survivor throw a ferry::Error
// that names the dead rank and the phase, within a few timeouts; the survivor
// then destroys its objects and its process exits 0.
//
// The ranks are processes this test forks (mpirun would end the whole job when
// one rank dies), joined by the TCP bootstrap, all on GPU rank % device count
// (every rank on GPU 0 of a one-GPU machine: several contexts, time-sliced). The
// parent never touches CUDA (forking after CUDA initialized is undefined): it
// learns whether there is a GPU from a forked child's exit code. Each case is
// one group of processes: a few good calls on every rank (kernels loaded, peers
// wired), a bootstrap barrier, then the victim dies:
//   - before: it raises SIGKILL just before the call under test; the survivors
//     make that call at once (they must fail in it);
//   - mid: a thread of the victim raises SIGKILL 30 ms into the call (the
//     victim's kernels are launched and it waits in the library's host sync),
//     while the survivors join the call 150 ms late, so the victim is dead by
//     then. Survivors may then finish that call (what the victim sent before
//     dying can be all they needed) and fail in the next one.
// Survivors keep calling (at most 4 rounds) until one throws; the checks, in the
// survivor (its exit code says which failed):
//   - the error is a TimeoutError or TransportError (not Aborted: it is the first);
//   - it says "rank V is gone" (V the victim: NOTE [Naming the dead rank],
//     src/communicator.cpp) and calls no survivor gone;
//   - it names the phase of the call that threw (across nodes also the proxy's
//     phases: the wait may be on the proxy, or UCX may report the peer first);
//   - it came within 3 x timeout + 2 s of the survivor's first call after the barrier;
//   - the communicator is aborted and a later call throws AbortedError;
//   - the objects and the communicator are destroyed within 2 x timeout + 10 s.
// The parent kills everything and fails the case when a process is still alive
// 90 s after the group started (a hang: the outcome this test exists to catch),
// and checks that the victim died by SIGKILL and every survivor exited 0.
//
// Environment: FERRY_FAULT_TIMEOUT_MS (device timeout, default 3000),
// FERRY_FAULT_PARALLEL (groups at once, default 3), FERRY_FAULT_CASES (only the
// cases whose name contains this text).
//
// The liveness probe itself is tested on the CPU in test_bootstrap_liveness.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <new>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ferry/allreduce.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/device/timeout.cuh"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "gpu/forked_ranks.hpp"
#include "gpu/killed_peer_work.hpp"

namespace {

using namespace ferry::testing::forked;
using namespace ferry::testing::killed_peer;

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::EpMode;
using ferry::TensorView;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}
const std::chrono::milliseconds kTimeout{std::max(500, env_int("FERRY_FAULT_TIMEOUT_MS", 3000))};
const int kParallel = std::max(1, env_int("FERRY_FAULT_PARALLEL", 3));
constexpr int kGoodRounds = 3;
constexpr int kSurvivorRounds = 4;
constexpr auto kGroupDeadline = std::chrono::seconds(90);
constexpr auto kKillAfter = std::chrono::milliseconds(30);    // mid: the victim dies this far into the call
constexpr auto kSurvivorLag = std::chrono::milliseconds(150);  // mid: the survivors join the call this late


// Exit codes of a rank's process.
enum : int {
  kOk = 0,
  kNoError = 10,       // no call threw in kSurvivorRounds rounds
  kNotNamed = 11,      // the message does not say that the victim is gone
  kFalseGone = 12,     // the message calls a survivor gone
  kWrongPhase = 13,    // the message does not name the phase of the call that threw
  kTooLate = 14,       // the error came later than 3 x timeout + 2 s
  kWrongType = 15,     // not a TimeoutError / TransportError (or not a ferry::Error)
  kNotAborted = 16,    // the communicator was not aborted, or a later call did not throw AbortedError
  kSlowTeardown = 17,  // destroying the objects took longer than 2 x timeout + 10 s
  kSetupFailed = 18,   // bootstrap, communicator, buffers
  kWarmupFailed = 19,  // a good call failed (or gave a wrong AllReduce result)
  kNoGpu = 20,         // the child sees no CUDA device
};
const char* exit_meaning(int code) {
  switch (code) {
    case kOk: return "ok";
    case kNoError: return "no error within the rounds";
    case kNotNamed: return "the error does not say the dead rank is gone";
    case kFalseGone: return "the error calls a live rank gone";
    case kWrongPhase: return "the error does not name the phase of the call";
    case kTooLate: return "the error came too late";
    case kWrongType: return "wrong exception type";
    case kNotAborted: return "not aborted after the error";
    case kSlowTeardown: return "teardown too slow";
    case kSetupFailed: return "setup failed";
    case kWarmupFailed: return "a good call failed";
    case kNoGpu: return "no GPU in the child";
    default: return "?";
  }
}


// "rank V is gone" / "ranks A, V are gone" (NOTE [Naming the dead rank]).
bool says_gone(const std::string& what, int rank) {
  const std::regex re("ranks? ([0-9]+, )*" + std::to_string(rank) + "(, [0-9]+)* (is|are) gone");
  return std::regex_search(what, re);
}

// The text of the first "phase '...'" in the message.
std::string phase_in(const std::string& what) {
  const size_t at = what.find("phase '");
  if (at == std::string::npos) return "";
  const size_t end = what.find('\'', at + 7);
  return end == std::string::npos ? "" : what.substr(at + 7, end - at - 7);
}

// A rank's process: returns its exit code (the victim never returns once its
// good rounds are done).
int run_rank(const Case& c, const std::string& id, int rank, const SharedCounter& erred) {
  const std::string who = c.name + " rank " + std::to_string(rank) + (rank == c.victim ? " (victim)" : "");
  if (c.per_node > 0) {
    setenv("FERRY_RANKS_PER_NODE", std::to_string(c.per_node).c_str(), 1);
  } else {
    unsetenv("FERRY_RANKS_PER_NODE");
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) return kNoGpu;

  std::unique_ptr<ferry::Communicator> comm;
  cudaStream_t stream = nullptr;
  std::unique_ptr<Work> work;
  try {
    ferry::TcpBootstrapOptions boot_options;
    boot_options.timeout = std::chrono::seconds(60);
    auto bootstrap = std::make_shared<ferry::TcpBootstrap>(ferry::TcpBootstrap::id_from_string(id), rank, c.world,
                                                           boot_options);
    ferry::CommunicatorOptions options;
    options.device = rank % gpus;
    options.timeout = kTimeout;
    comm = std::make_unique<ferry::Communicator>(bootstrap, options);
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (c.op == Op::kAllReduce)
      work = std::make_unique<AllReduceWork>(*comm, c, stream);
    else
      work = std::make_unique<EpWork>(*comm, c, stream);
  } catch (const std::exception& e) {
    say(who, "setup failed: %s", e.what());
    return kSetupFailed;
  }
  // Good rounds on every rank, then a barrier: nobody is still in a good call
  // when the victim dies.
  try {
    for (int i = 0; i < kGoodRounds; ++i) work->round([](Op) {}, true);
    comm->bootstrap().barrier();
  } catch (const std::exception& e) {
    say(who, "a good call failed: %s", e.what());
    return kWarmupFailed;
  }
  const Op target = c.op;

  if (rank == c.victim) {
    auto die = [&](Op op) {
      if (op != target) return;
      if (c.when == When::kBefore) {
        say(who, "SIGKILL before the call");
        raise(SIGKILL);
      }
      say(who, "SIGKILL %d ms into the call", static_cast<int>(kKillAfter.count()));
      std::thread([] {
        std::this_thread::sleep_for(kKillAfter);
        raise(SIGKILL);
      }).detach();
    };
    try {
      work->round(die, false);
    } catch (const std::exception& e) {
      say(who, "the call threw before SIGKILL: %s", e.what());
    }
    for (;;) pause();  // the killer thread ends this process
  }

  // Survivors: call until one throws.
  bool lagged = false;
  Op current = target;
  auto lag = [&](Op op) {
    current = op;
    if (c.when == When::kMid && op == target && !lagged) {
      lagged = true;
      std::this_thread::sleep_for(kSurvivorLag);
    }
  };
  const auto start = Clock::now();
  std::string what;
  bool right_type = false;
  int calls = 0;
  try {
    for (int i = 0; i < kSurvivorRounds; ++i, ++calls) work->round(lag, false);
    say(who, "no error in %d rounds after the victim died", kSurvivorRounds);
    erred.arrive_and_wait(0, std::chrono::seconds(0));
    return kNoError;
  } catch (const ferry::TimeoutError& e) {
    what = e.what(), right_type = true;
  } catch (const ferry::TransportError& e) {
    what = e.what(), right_type = true;
  } catch (const std::exception& e) {
    what = e.what();
  }
  const double took = seconds_since(start);
  const char* op_name = current == Op::kAllReduce ? "allreduce" : current == Op::kDispatch ? "dispatch" : "combine";
  say(who, "%s threw after %.2f s (round %d): %s", op_name, took, calls, what.c_str());
  int verdict = kOk;
  for (int r = 0; r < c.world && verdict == kOk; ++r)
    if (r != c.victim && says_gone(what, r)) verdict = kFalseGone;
  if (verdict == kOk && !right_type) verdict = kWrongType;
  if (verdict == kOk && !says_gone(what, c.victim)) verdict = kNotNamed;
  if (verdict == kOk && !phase_fits(c, current, phase_in(what))) verdict = kWrongPhase;
  if (verdict == kOk && took > 3.0 * kTimeout.count() / 1000.0 + 2.0) verdict = kTooLate;
  if (verdict == kOk) {
    bool aborted_error = false;
    try {
      work->round([](Op) {}, false);
    } catch (const ferry::AbortedError&) {
      aborted_error = true;
    } catch (const std::exception& e) {
      say(who, "the call after the error threw something else: %s", e.what());
    }
    if (!comm->aborted() || !aborted_error) verdict = kNotAborted;
  }
  erred.arrive_and_wait(c.world - 1, std::chrono::duration<double>(4.0 * kTimeout.count() / 1000.0 + 10.0));
  // Teardown: the objects, then the communicator (proxy, heap, bootstrap).
  const auto t0 = Clock::now();
  work.reset();
  cudaStreamDestroy(stream);
  comm.reset();
  const double teardown = seconds_since(t0);
  say(who, "teardown took %.2f s; verdict: %s", teardown, exit_meaning(verdict));
  if (verdict == kOk && teardown > 2.0 * kTimeout.count() / 1000.0 + 10.0) verdict = kSlowTeardown;
  return verdict;
}

// ---------------------------------------------------------------- parent

// The number of CUDA devices, asked in a forked child (the parent must not
// initialize CUDA before it forks the ranks). Once per program.
int gpus_in_child() {
  static int gpus = -1;
  if (gpus >= 0) return gpus;
  const pid_t pid = fork_child([] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    return std::min(n, 64);
  });
  int status = 0;
  gpus = pid > 0 && wait_child(pid, Clock::now() + std::chrono::seconds(60), status) && WIFEXITED(status)
             ? WEXITSTATUS(status)
             : 0;
  return gpus;
}

#define REQUIRE_GPU()                                                                                   \
  do {                                                                                                  \
    if (gpus_in_child() == 0) {                                                                         \
      std::printf("*** FERRY GPU TESTS SKIPPED: no CUDA device (asked in a forked child) ***\n");       \
      GTEST_SKIP() << "FERRY GPU TESTS SKIPPED: no CUDA device";                                        \
    }                                                                                                   \
  } while (0)

struct Group {
  Case c;
  std::unique_ptr<SharedCounter> erred;
  std::vector<pid_t> pids;
  std::vector<int> status;
  std::vector<bool> exited;
  Clock::time_point started;
};

// Checks one finished (or hung) group's exit statuses.
void judge(const Group& g) {
  for (int r = 0; r < g.c.world; ++r) {
    const int s = g.status[static_cast<size_t>(r)];
    if (!g.exited[static_cast<size_t>(r)]) {
      ADD_FAILURE() << g.c.name << ": rank " << r << " was still running " << kGroupDeadline.count()
                    << " s after the group started (a hang); killed";
      continue;
    }
    if (r == g.c.victim) {
      EXPECT_TRUE(WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL)
          << g.c.name << ": the victim rank " << r << " should die by SIGKILL, but "
          << (WIFEXITED(s) ? std::string("exited ") + std::to_string(WEXITSTATUS(s)) + " (" +
                                 exit_meaning(WEXITSTATUS(s)) + ")"
                           : "died by signal " + std::to_string(WTERMSIG(s)));
      continue;
    }
    if (!WIFEXITED(s)) {
      ADD_FAILURE() << g.c.name << ": survivor rank " << r << " crashed (signal " << WTERMSIG(s) << ")";
      continue;
    }
    EXPECT_EQ(WEXITSTATUS(s), kOk) << g.c.name << ": survivor rank " << r << ": "
                                   << exit_meaning(WEXITSTATUS(s)) << " (its lines above say more)";
  }
}

// Runs the cases, kParallel groups at a time.
void run_cases(std::vector<Case> cases) {
  if (const char* only = std::getenv("FERRY_FAULT_CASES"); only != nullptr && *only != '\0')
    std::erase_if(cases, [&](const Case& c) { return c.name.find(only) == std::string::npos; });
  if (cases.empty()) GTEST_SKIP() << "no case matches FERRY_FAULT_CASES";
  std::deque<Case> todo(cases.begin(), cases.end());
  std::vector<Group> running;
  const auto t0 = Clock::now();
  while (!todo.empty() || !running.empty()) {
    while (!todo.empty() && static_cast<int>(running.size()) < kParallel) {
      Group g;
      g.c = todo.front();
      todo.pop_front();
      g.erred = std::make_unique<SharedCounter>();
      g.started = Clock::now();
      // Port 0: the id holds its listening socket, which the forked rank 0 claims.
      const std::string id = ferry::TcpBootstrap::id_to_string(ferry::TcpBootstrap::create_unique_id("127.0.0.1"));
      std::fprintf(stderr, "=== %s: %d ranks%s, victim %d\n", g.c.name.c_str(), g.c.world,
                   g.c.per_node ? (" in nodes of " + std::to_string(g.c.per_node)).c_str() : "", g.c.victim);
      for (int r = 0; r < g.c.world; ++r) {
        const Case& c = g.c;
        const SharedCounter& erred = *g.erred;
        g.pids.push_back(fork_child([&c, &id, &erred, r] { return run_rank(c, id, r, erred); }));
      }
      g.status.assign(g.pids.size(), 0);
      g.exited.assign(g.pids.size(), false);
      running.push_back(std::move(g));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (size_t i = 0; i < running.size();) {
      Group& g = running[i];
      bool all_done = true;
      for (size_t r = 0; r < g.pids.size(); ++r) {
        if (!g.exited[r] && g.pids[r] > 0 && waitpid(g.pids[r], &g.status[r], WNOHANG) == g.pids[r])
          g.exited[r] = true;
        all_done = all_done && (g.exited[r] || g.pids[r] <= 0);
      }
      if (!all_done && Clock::now() - g.started <= kGroupDeadline) {
        ++i;
        continue;
      }
      for (size_t r = 0; r < g.pids.size(); ++r) {  // a hang: end the group
        if (g.exited[r] || g.pids[r] <= 0) continue;
        kill(g.pids[r], SIGKILL);
        waitpid(g.pids[r], nullptr, 0);
      }
      std::fprintf(stderr, "=== %s: done after %.1f s\n", g.c.name.c_str(), seconds_since(g.started));
      judge(g);
      running.erase(running.begin() + static_cast<long>(i));
    }
  }
  std::fprintf(stderr, "=== %zu cases in %.1f s (timeout %lld ms, %d groups at a time)\n", cases.size(),
               seconds_since(t0), static_cast<long long>(kTimeout.count()), kParallel);
}

// ---------------------------------------------------------------- GPU tests
// One node: every AllReduce algorithm (one-shot at 4 KB runs its LL protocol,
// at 256 KB the fenced one), on 2 and 3 ranks (recursive doubling: 2 and 4).
// With 3 ranks a survivor can wait on a live peer that waits on the victim, so
// "rank V is gone" is what names the dead rank there.
TEST(KilledPeer, AllReduceOneNode) {
  REQUIRE_GPU();
  using A = AllReduceAlgorithm;
  run_cases({
      allreduce_case(2, 0, A::kOneShot, 4 << 10, When::kMid, 1),
      allreduce_case(2, 0, A::kOneShot, 256 << 10, When::kBefore, 0),
      allreduce_case(2, 0, A::kTwoShot, 1 << 20, When::kMid, 0),
      allreduce_case(2, 0, A::kRing, 256 << 10, When::kMid, 1),
      allreduce_case(2, 0, A::kRecursiveDoubling, 64 << 10, When::kBefore, 1),
      allreduce_case(3, 0, A::kOneShot, 4 << 10, When::kMid, 2),
      allreduce_case(3, 0, A::kOneShot, 256 << 10, When::kBefore, 1),
      allreduce_case(3, 0, A::kTwoShot, 1 << 20, When::kBefore, 2),
      allreduce_case(3, 0, A::kRing, 256 << 10, When::kMid, 0),
      allreduce_case(3, 0, A::kRing, 256 << 10, When::kBefore, 2),
      allreduce_case(4, 0, A::kRecursiveDoubling, 64 << 10, When::kMid, 3),
  });
}

// One node, both EP modes, dispatch and combine, the victim dying before and in
// the middle of the call, on 2 and 3 ranks.
TEST(KilledPeer, EpOneNode) {
  REQUIRE_GPU();
  const EpMode ht = EpMode::kHighThroughput, ll = EpMode::kLowLatency;
  run_cases({
      ep_case(2, 0, ht, Op::kDispatch, When::kMid, 1),
      ep_case(2, 0, ht, Op::kCombine, When::kBefore, 0),
      ep_case(2, 0, ll, Op::kDispatch, When::kBefore, 1),
      ep_case(2, 0, ll, Op::kCombine, When::kMid, 0),
      ep_case(3, 0, ht, Op::kDispatch, When::kBefore, 2),
      ep_case(3, 0, ht, Op::kCombine, When::kMid, 0),
      ep_case(3, 0, ll, Op::kDispatch, When::kMid, 0),
      ep_case(3, 0, ll, Op::kCombine, When::kBefore, 2),
  });
}

// Across virtual nodes (FERRY_RANKS_PER_NODE): the hierarchical AllReduce and
// both EP modes through the proxy and UCX; 3 nodes of 1 (a survivor may wait on
// a survivor) and 2 nodes of 2 (NVLink inside the node, forwarding).
TEST(KilledPeer, AcrossNodes) {
  REQUIRE_GPU();
  const EpMode ht = EpMode::kHighThroughput, ll = EpMode::kLowLatency;
  using A = AllReduceAlgorithm;
  run_cases({
      allreduce_case(2, 1, A::kHierarchical, 256 << 10, When::kMid, 1),
      allreduce_case(3, 1, A::kHierarchical, 256 << 10, When::kBefore, 1),
      allreduce_case(4, 2, A::kHierarchical, 256 << 10, When::kMid, 2),
      ep_case(2, 1, ht, Op::kDispatch, When::kMid, 0),
      ep_case(2, 1, ht, Op::kCombine, When::kBefore, 1),
      ep_case(2, 1, ll, Op::kDispatch, When::kBefore, 1),
      ep_case(2, 1, ll, Op::kCombine, When::kMid, 0),
      ep_case(4, 2, ht, Op::kDispatch, When::kBefore, 3),
  });
}


}  // namespace
