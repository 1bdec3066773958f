// Helpers of the tests that fork their own ranks (test_killed_peer.cpp,
// test_bootstrap_liveness.cpp): mpirun would end the whole job when one rank
// dies, so these tests fork processes and join them with the TCP bootstrap.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <thread>

namespace ferry::testing::forked {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One line to stderr (one write: lines of concurrent processes do not mix).
inline void say(const std::string& who, const char* fmt, ...) {
  char text[3000];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[%s] %s\n", who.c_str(), text);
}

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
inline bool wait_child(pid_t pid, Clock::time_point deadline, int& status) {
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

}  // namespace ferry::testing::forked
