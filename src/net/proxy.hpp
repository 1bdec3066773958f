// The CPU proxy: one thread per GPU (per communicator) that drains the FIFO the
// GPU's threads push descriptors into (NOTE [Proxy FIFO protocol],
// include/ferry/device/fifo.cuh) and turns each into transport operations:
// put, put then signal, signal, quiet. It keeps progressing the transport while
// idle, since over tcp and shared memory a UCX target only makes progress when
// its worker is progressed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/device/fifo.cuh"
#include "ferry/device/timeout.cuh"
#include "net/transport.hpp"

namespace ferry::net {

// What the proxy needs to serve one window (filled by ferry::Window, or by a
// test on host memory).
struct ProxyWindow {
  char* local = nullptr;       // where the proxy reads put sources: the window, or its pinned host
                               // mirror the kernels copy sources into (NOTE [Window staging], window.cpp)
  size_t bytes = 0;
  bool local_is_cuda = false;  // local is device memory (the transport moves it itself)
  int data_region = -1;        // transport region where puts land at the peer
  int signal_region = -1;      // transport region of the network signal words
  uint32_t num_signals = 0;    // per source rank
};

// The FIFO's counters, shared with the GPU: acquire loads and release stores.
inline uint64_t load_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// Host-side waiting: spin briefly, then yield, then sleep, so that waiting
// threads leave the cores to the proxies they wait for (ranks often outnumber
// cores on test machines).
class Backoff {
 public:
  void pause() {
    ++spins_;
    if (spins_ < 64) return;
    if (spins_ < 256) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(spins_ < 4096 ? 5 : 50));
  }
  void reset() { spins_ = 0; }

 private:
  uint32_t spins_ = 0;
};

struct ProxyOptions {
  bool cuda = false;           // GPU producers (head in device memory, ring in mapped host memory)
  int device = 0;
  int rank = 0;
  size_t fifo_capacity = 1024; // entries
  std::chrono::nanoseconds timeout{std::chrono::seconds(10)};
  DeviceErrorState* error = nullptr;  // where a transport failure is reported (host-mapped), or nullptr
  int32_t* device_abort = nullptr;    // device abort flag raised on a transport failure, or nullptr
  // Knobs (src/common/knobs.hpp), read when the options are made: before the
  // transport's collective creation, so a bad value throws on every rank alike.
  uint64_t idle_spins = knobs::kProxyIdleSpins.value();         // idle loops before napping; 0: never
  // Largest single put (at least 4 KiB); unset: the transport's preference, else the knob's default.
  std::optional<size_t> put_chunk_bytes = knobs::kProxyPutChunkBytes.read();
  bool timed = knobs::kProxyStats.value();  // ProxyStats' times (a clock read per step), not only counts
  // Signals held for one fence per batch while fewer bytes were put since the last fence (NOTE [Signals after
  // the batch's puts], proxy.cpp); 0: a fence before every signal.
  uint64_t hold_signals_bytes = knobs::kProxyHoldSignalsBytes.value();
};

// Where the proxy thread's time goes, cumulative since it started (any thread
// may read it): the proxy's part of a cross-node call's per-stage split.
// issue_us includes fence_us and wait_room_us. The times are kept only with
// ProxyOptions::timed (FERRY_PROXY_STATS=1: about 30 ns per clock read, 4 per
// put, a fifth of a small put over shared memory); else they stay 0.
struct ProxyStats {
  uint64_t descriptors = 0;  // FIFO entries handled
  uint64_t puts = 0;         // UCX data puts issued (a large put counts its pieces)
  uint64_t signals = 0;      // signal puts
  uint64_t fences = 0;       // fences issued before signals (fewer than signals where they were held)
  uint64_t completed = 0;    // requests seen complete (data, signals, quiets)
  double issue_us = 0;       // handling descriptors: the UCX calls that issue them
  double fence_us = 0;       // the fences before signals
  double wait_room_us = 0;   // waiting for earlier requests to make room (kMaxInFlight)
  double complete_us = 0;    // over completed requests: issued -> seen complete (in issue order)
};

class Proxy {
 public:
  Proxy(std::unique_ptr<Transport> transport, ProxyOptions options);
  // The largest single UCX put this proxy issues (ProxyOptions::put_chunk_bytes,
  // or the transport's preference).
  size_t put_chunk() const { return put_chunk_; }
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  Transport& transport() { return *transport_; }
  // Held by the proxy thread while it touches the transport; registration takes it.
  std::mutex& lock() { return lock_; }

  uint32_t add_window(const ProxyWindow& window);
  void remove_window(uint32_t id);
  // Pinned host memory (cudaHostAlloc) of a removed window: freed after the
  // transport closes, since until then a peer's late put could still land in it.
  void adopt_host_memory(void* pinned);

  // The producers' handle (what DeviceWindow carries).
  const FifoHandle& fifo() const { return fifo_; }

  // Host producers (a FIFO made with cuda = false): the same protocol a kernel
  // follows. push waits for a free slot up to the timeout (TimeoutError).
  uint64_t push(const FifoEntry& entry);
  // Pushes a kQuiet and waits until everything before it completed.
  void quiet();
  // Waits until every entry pushed so far is retired and complete at its target
  // (before a window goes away). Ends early, without error, once the transport failed.
  void drain();

  // NOTE [Proxy warm-up]
  // Collective, right after creation (warm_up) and when a window is added
  // (warm_up_window): small puts to every peer of another node, completed,
  // before any kernel runs. UCX wires endpoints up and picks its protocols on
  // first use; doing that here makes a peer that cannot be reached fail at
  // creation, not in the middle of a kernel, and takes the wire-up off the
  // first real transfer. warm_up_window goes through the window's own path
  // (its put source, each size class, a signal of total 0).
  // Not the fix for the first-exchange hang on the H200 box: that one is lazy
  // module loading (NOTE [Lazy loading and the proxy], communicator.cpp); these
  // warm-ups were tried for it first and did not change it.
  void warm_up(Bootstrap& bootstrap);
  void warm_up_window(uint32_t id, Bootstrap& bootstrap);

  // Throws ferry::Error when the transport failed (a peer died): failure_report().
  void check() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string failure() const;
  // "inter-node transfer failed on rank R in phase 'proxy transfer': <failure()>".
  std::string failure_report() const;

  // What the proxy is doing, for error messages ("proxy on rank 3: 12 descriptors
  // retired, ... now idle").
  std::string state() const;
  // Counters, for tests and the bench.
  uint64_t retired() const;
  uint64_t put_bytes() const { return counters_.put_bytes.load(std::memory_order_relaxed); }
  ProxyStats stats() const;

 private:
  struct InFlight {
    Request request = nullptr;
    std::optional<uint64_t> quiet;   // quiet ticket published when it completes
    std::unique_ptr<uint64_t> operand;  // a signal's value, alive until its put completed
    int64_t issued_ns = 0;              // steady clock, for ProxyStats::complete_us
    int peer = -1;                      // the target rank (-1: a flush of every endpoint)
  };
  // The proxy thread's counters (ProxyStats; written by it alone, read by anyone).
  struct Counters {
    std::atomic<uint64_t> descriptors{0}, puts{0}, signals{0}, fences{0}, completed{0}, put_bytes{0};
    std::atomic<int64_t> issue_ns{0}, fence_ns{0}, wait_room_ns{0}, complete_ns{0};
  };
  // Steady-clock ns, or 0 when the proxy is not timed.
  int64_t now_ns() const {
    if (!options_.timed) return 0;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // The proxy thread is the only writer: no locked read-modify-write.
  template <typename T>
  static void bump(std::atomic<T>& counter, T by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  void keep_in_flight(InFlight f) {
    f.issued_ns = now_ns();
    in_flight_.push_back(std::move(f));
  }

  enum Activity : int { kIdle = 0, kIssuing = 1, kWaitingForRequests = 2 };

  void run();
  void handle(const FifoEntry& entry, uint64_t ticket);  // handle_entry, timed (ProxyStats)
  void handle_entry(const FifoEntry& entry, uint64_t ticket);
  void put(const ProxyWindow& window, const FifoEntry& entry);
  void signal(const ProxyWindow& window, const FifoEntry& entry);
  void release_signals();  // NOTE [Signals after the batch's puts]
  bool wait_for_request_room();
  void retire();
  void note_failure(const std::string& what, int peer);
  void note_transport_failure();
  void publish_failure();

  std::unique_ptr<Transport> transport_;
  ProxyOptions options_;
  size_t put_chunk_;  // resolved from options_.put_chunk_bytes and the transport at construction
  std::mutex lock_;

  // FIFO memory (host-mapped when cuda; plain host memory otherwise).
  FifoEntry* entries_ = nullptr;
  uint64_t* head_ = nullptr;     // device memory (cuda) or host memory
  uint64_t* tail_ = nullptr;     // host
  uint64_t* flushed_ = nullptr;  // host
  FifoHandle fifo_{};
  uint64_t next_ticket_ = 0;     // proxy thread only

  std::vector<std::optional<ProxyWindow>> windows_;
  std::deque<InFlight> in_flight_;
  std::atomic<int> activity_{kIdle};
  std::unordered_map<uint64_t, uint64_t> signal_totals_;  // NOTE [Network signals]
  struct HeldSignal {
    uint32_t window;
    int peer;
    uint32_t index;
    uint64_t value;
  };
  std::vector<HeldSignal> held_signals_;  // NOTE [Signals after the batch's puts]; empty while lock_ is free
  uint64_t bytes_since_fence_ = 0;        // data put since the last fence

  cudaStream_t stream_ = nullptr;  // cuda only: raising the device abort flag after a failure
  Counters counters_;

  std::atomic<bool> failed_{false};
  bool failure_published_ = false;
  mutable std::mutex failure_lock_;
  std::string failure_;

  std::vector<void*> adopted_;  // pinned host memory freed after the transport
  std::vector<std::function<void()>> tasks_;  // run by the proxy thread (under lock_)

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ferry::net
