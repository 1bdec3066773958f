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
// BootstrapLiveness.* (CPU, no CUDA, forked ranks): the TCP bootstrap's liveness
// probe itself (NOTE [Bootstrap liveness], src/bootstrap/tcp_bootstrap.cpp).
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

namespace {

using Clock = std::chrono::steady_clock;
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

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

// One line to stderr (one write: lines of concurrent processes do not mix).
void say(const std::string& who, const char* fmt, ...) {
  char text[3000];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[%s] %s\n", who.c_str(), text);
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

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// ---------------------------------------------------------------- cases
enum class Op { kAllReduce, kDispatch, kCombine };
enum class When { kBefore, kMid };

struct Case {
  std::string name;
  int world = 2;
  int per_node = 0;  // FERRY_RANKS_PER_NODE; 0: one node
  Op op = Op::kAllReduce;
  AllReduceAlgorithm algo = AllReduceAlgorithm::kAuto;
  size_t bytes = 0;  // AllReduce
  EpMode mode = EpMode::kHighThroughput;
  When when = When::kMid;
  int victim = 1;
};

Case allreduce_case(int world, int per_node, AllReduceAlgorithm algo, size_t bytes, When when, int victim) {
  Case c;
  c.world = world, c.per_node = per_node, c.op = Op::kAllReduce, c.algo = algo, c.bytes = bytes, c.when = when;
  c.victim = victim;
  c.name = "ar_" + std::string(ferry::algorithm_name(algo)) + "_" + std::to_string(bytes >> 10) + "K_w" +
           std::to_string(world) + (per_node ? "x" + std::to_string(per_node) : "") +
           (when == When::kMid ? "_mid_v" : "_before_v") + std::to_string(victim);
  return c;
}

Case ep_case(int world, int per_node, EpMode mode, Op op, When when, int victim) {
  Case c;
  c.world = world, c.per_node = per_node, c.op = op, c.mode = mode, c.when = when, c.victim = victim;
  c.name = std::string(mode == EpMode::kHighThroughput ? "ep_ht_" : "ep_ll_") +
           (op == Op::kDispatch ? "dispatch" : "combine") + "_w" + std::to_string(world) +
           (per_node ? "x" + std::to_string(per_node) : "") + (when == When::kMid ? "_mid_v" : "_before_v") +
           std::to_string(victim);
  return c;
}

// Phase names (include/ferry/device/timeout.cuh) the error may carry for a call.
bool phase_fits(const Case& c, Op failed_in, const std::string& phase) {
  if (phase.empty()) return false;
  if (c.per_node > 0) {  // the wait may be on the proxy, or UCX may report the dead peer first
    for (const char* p : {"proxy transfer", "proxy quiet", "proxy fifo full", "wait_signal"})
      if (phase == p) return true;
  }
  if (failed_in == Op::kDispatch) return phase == "ep dispatch";
  if (failed_in == Op::kCombine) return phase == "ep combine";
  switch (c.algo) {
    case AllReduceAlgorithm::kOneShot: return starts_with(phase, "allreduce one-shot");
    case AllReduceAlgorithm::kTwoShot: return starts_with(phase, "allreduce two-shot");
    case AllReduceAlgorithm::kRing: return starts_with(phase, "allreduce ring");
    case AllReduceAlgorithm::kRecursiveDoubling: return starts_with(phase, "allreduce recursive doubling");
    case AllReduceAlgorithm::kHierarchical: return starts_with(phase, "allreduce hierarchical");
    default: return starts_with(phase, "allreduce");
  }
}

// ---------------------------------------------------------------- one rank's work
// What a rank drives: an AllReduce, or an EpBuffer with its inputs. Calls
// synchronize through the communicator, so a device error throws here.
struct Work {
  virtual ~Work() = default;
  // One round: AllReduce::run, or dispatch then combine. `before(op)` runs just
  // before each call (the victim dies there; survivors lag there).
  virtual void round(const std::function<void(Op)>& before, bool check) = 0;
};

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct AllReduceWork : Work {
  ferry::Communicator& comm;
  const Case& c;
  cudaStream_t stream;
  std::unique_ptr<ferry::AllReduce> ar;
  float* in = nullptr;
  float* out = nullptr;
  size_t count;

  AllReduceWork(ferry::Communicator& comm_, const Case& c_, cudaStream_t stream_)
      : comm(comm_), c(c_), stream(stream_), count(c_.bytes / sizeof(float)) {
    ar = std::make_unique<ferry::AllReduce>(comm, size_t{1} << 20);
    if (!ar->supports(c.algo))
      throw std::runtime_error(std::string("AllReduce does not support ") + ferry::algorithm_name(c.algo));
    cuda_ok(cudaMalloc(&in, c.bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&out, c.bytes), "cudaMalloc");
    std::vector<float> host(count, static_cast<float>(comm.rank() + 1));
    cuda_ok(cudaMemcpy(in, host.data(), c.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~AllReduceWork() override {
    ar.reset();
    cudaFree(in);
    cudaFree(out);
  }
  void round(const std::function<void(Op)>& before, bool check) override {
    before(Op::kAllReduce);
    ar->run(in, out, count, DataType::kFloat32, ferry::ReduceOp::kSum, stream, c.algo);
    comm.synchronize(stream);
    if (!check) return;
    float got[2] = {};
    cuda_ok(cudaMemcpy(&got[0], out, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cuda_ok(cudaMemcpy(&got[1], out + count - 1, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    const float want = static_cast<float>(c.world * (c.world + 1) / 2);
    if (got[0] != want || got[1] != want)
      throw std::runtime_error("AllReduce gave " + std::to_string(got[0]) + ", " + std::to_string(got[1]) +
                               " instead of " + std::to_string(want));
  }
};

struct EpWork : Work {
  static constexpr int kTokens = 64, kHidden = 512, kTopk = 2;
  ferry::Communicator& comm;
  const Case& c;
  cudaStream_t stream;
  std::unique_ptr<ferry::EpBuffer> buf;
  void* tokens = nullptr;
  int32_t* idx = nullptr;
  float* weights = nullptr;
  void* out = nullptr;
  ferry::DispatchResult result;

  EpWork(ferry::Communicator& comm_, const Case& c_, cudaStream_t stream_) : comm(comm_), c(c_), stream(stream_) {
    ferry::EpConfig config;
    config.max_tokens_per_rank = kTokens;
    config.hidden = kHidden;
    config.topk = kTopk;
    config.num_experts = 4 * c.world;
    config.mode = c.mode;
    buf = std::make_unique<ferry::EpBuffer>(comm, config);
    const size_t token_bytes = size_t{kTokens} * kHidden * 2;
    cuda_ok(cudaMalloc(&tokens, token_bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&out, token_bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&idx, sizeof(int32_t) * kTokens * kTopk), "cudaMalloc");
    cuda_ok(cudaMalloc(&weights, sizeof(float) * kTokens * kTopk), "cudaMalloc");
    cuda_ok(cudaMemset(tokens, 0, token_bytes), "cudaMemset");
    // Token t picks experts t and t + E/2 (mod E): distinct, and every rank gets rows.
    const int experts = config.num_experts;
    std::vector<int32_t> host_idx(size_t{kTokens} * kTopk);
    std::vector<float> host_w(host_idx.size(), 0.5f);
    for (int t = 0; t < kTokens; ++t)
      for (int k = 0; k < kTopk; ++k) host_idx[size_t(t) * kTopk + k] = (t + comm.rank() + k * experts / 2) % experts;
    cuda_ok(cudaMemcpy(idx, host_idx.data(), host_idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(weights, host_w.data(), host_w.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~EpWork() override {
    buf.reset();
    cudaFree(tokens);
    cudaFree(out);
    cudaFree(idx);
    cudaFree(weights);
  }
  void round(const std::function<void(Op)>& before, bool) override {
    before(Op::kDispatch);
    result = buf->dispatch(TensorView(tokens, DataType::kBFloat16, {kTokens, kHidden}),
                           TensorView(idx, DataType::kInt32, {kTokens, kTopk}),
                           TensorView(weights, DataType::kFloat32, {kTokens, kTopk}), TensorView{}, stream);
    comm.synchronize(stream);
    before(Op::kCombine);
    // The dispatch output is the stand-in expert output (bf16, the same layout).
    const TensorView expert =
        c.mode == EpMode::kHighThroughput
            ? TensorView(result.tokens, DataType::kBFloat16, {result.num_rows, kHidden})
            : TensorView(result.tokens, DataType::kBFloat16,
                         {result.local_experts, result.capacity_per_expert, kHidden});
    buf->combine(expert, result.handle, TensorView(out, DataType::kBFloat16, {kTokens, kHidden}), stream);
    comm.synchronize(stream);
  }
};

// Memory shared by the processes of one group (mapped before they are forked):
// survivors that have their error count themselves here, and keep their
// bootstrap (so they are not "gone" yet) until every survivor has its error:
// a survivor that fails a round later than another probes after the other
// finished, and a rank that left the group is gone, rightly.
struct SharedCounter {
  std::atomic<int>* value = nullptr;
  SharedCounter() {
    void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) value = new (p) std::atomic<int>(0);
  }
  ~SharedCounter() {
    if (value != nullptr) munmap(value, sizeof(std::atomic<int>));
  }
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;
  // Counts this process, then waits (up to `limit`) until `n` have counted.
  void arrive_and_wait(int n, std::chrono::duration<double> limit) const {
    if (value == nullptr) return;
    value->fetch_add(1);
    const auto start = Clock::now();
    while (value->load() < n && Clock::now() - start < limit) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
};
static_assert(std::atomic<int>::is_always_lock_free, "a process-shared counter needs a lock-free atomic");

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
// Forks `fn` as a child process; the child exits with its return value.
template <typename Fn>
pid_t fork_child(Fn fn) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: uncaught: %s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::exit(code);  // a normal exit (CUDA's own teardown included), not _exit
  }
  return pid;
}

// Waits for `pid` until `deadline`; false (and the child killed) when it is still running.
bool wait_child(pid_t pid, Clock::time_point deadline, int& status) {
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return true;
    if (done < 0) return false;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

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

// ---------------------------------------------------------------- CPU: the probe itself
// `world` forked ranks form a TcpBootstrap group; everyone is seen alive; after
// a barrier the victim is SIGKILLed; every survivor's probe then names exactly
// the victim as gone, quickly, with nobody silent. Exit code 0: right.
void liveness_case(int world, int victim) {
  const std::string id = ferry::TcpBootstrap::id_to_string(ferry::TcpBootstrap::create_unique_id("127.0.0.1"));
  const SharedCounter saw;  // survivors stay until all of them saw the victim gone
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pids.push_back(fork_child([&, r]() -> int {
      const std::string who = "liveness w" + std::to_string(world) + " rank " + std::to_string(r);
      ferry::TcpBootstrapOptions options;
      options.timeout = std::chrono::seconds(20);
      ferry::TcpBootstrap boot(ferry::TcpBootstrap::id_from_string(id), r, world, options);
      const ferry::PeerLiveness before = boot.probe_liveness(std::chrono::milliseconds(1000));
      if (!before.known || !before.gone.empty() || !before.silent.empty()) {
        say(who, "before the kill: known %d, %zu gone, %zu silent", before.known, before.gone.size(),
            before.silent.size());
        return 1;
      }
      boot.barrier();
      if (r == victim) raise(SIGKILL);
      const auto start = Clock::now();
      ferry::PeerLiveness after;
      while (seconds_since(start) < 10) {
        const auto t = Clock::now();
        after = boot.probe_liveness(std::chrono::milliseconds(500));
        if (seconds_since(t) > 1.0) {
          say(who, "a probe took %.2f s (budget 0.5 s)", seconds_since(t));
          return 2;
        }
        if (!after.gone.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const bool right = after.known && after.gone == std::vector<int>{victim} && after.silent.empty();
      saw.arrive_and_wait(world - 1, std::chrono::seconds(15));
      if (!right) {
        say(who, "after the kill: known %d, %zu gone (first %d), %zu silent", after.known, after.gone.size(),
            after.gone.empty() ? -1 : after.gone[0], after.silent.size());
        return 3;
      }
      say(who, "saw rank %d gone after %.2f s", victim, seconds_since(start));
      return 0;
    }));
  }
  for (int r = 0; r < world; ++r) {
    int status = 0;
    const bool exited = wait_child(pids[static_cast<size_t>(r)], Clock::now() + std::chrono::seconds(60), status);
    ASSERT_TRUE(exited) << "rank " << r << " hung";
    if (r == victim) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the victim should die by SIGKILL";
    } else {
      ASSERT_TRUE(WIFEXITED(status)) << "rank " << r << " crashed";
      EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r << " (1: not all alive before, 2: slow probe, 3: wrong "
                                        << "verdict after the kill)";
    }
  }
}

TEST(BootstrapLiveness, KilledMemberIsGone) { liveness_case(4, 2); }
TEST(BootstrapLiveness, KilledRootIsGone) { liveness_case(3, 0); }
TEST(BootstrapLiveness, TwoRanks) { liveness_case(2, 1); }

TEST(BootstrapLiveness, OneRankAndOtherBootstraps) {
  ferry::TcpBootstrap alone(ferry::TcpBootstrap::create_unique_id("127.0.0.1"), 0, 1);
  const ferry::PeerLiveness self = alone.probe_liveness(std::chrono::milliseconds(100));
  EXPECT_TRUE(self.known);
  EXPECT_TRUE(self.gone.empty());
  ferry::CallbackBootstrap callbacks(0, 2, [](const void*, void*, size_t) {}, [] {});
  const ferry::PeerLiveness unknown = callbacks.probe_liveness(std::chrono::milliseconds(100));
  EXPECT_FALSE(unknown.known) << "a callback bootstrap cannot tell";
  EXPECT_TRUE(unknown.gone.empty());
}

}  // namespace
