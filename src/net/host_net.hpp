// The proxy driven from the host: a window in host memory registered with the
// transport and a proxy with a host FIFO, where host threads push the same
// descriptors a kernel would. For the CPU tests of the proxy, the CPU mode of
// `ferry-bench net`, and host programs that want one-sided puts without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"
#include "ferry/topology.hpp"
#include "net/proxy.hpp"
#include "net/transport.hpp"

namespace ferry::net {

// Every rank its own (virtual) node: all traffic takes the proxy.
inline Topology one_rank_per_node(Bootstrap& bootstrap) {
  const char* name = knobs::kRanksPerNode.name();
  const char* old = std::getenv(name);
  const std::string saved = old != nullptr ? old : "";
  setenv(name, "1", 1);
  Topology topology = discover_topology(bootstrap);
  if (old != nullptr) setenv(name, saved.c_str(), 1);
  else unsetenv(name);
  return topology;
}

struct HostNet {
  Topology topology;
  std::unique_ptr<Proxy> proxy;
  char* window = nullptr;      // bytes, host memory: puts' source and landing
  uint64_t* signals = nullptr; // [world][num_signals]
  size_t bytes = 0;
  uint32_t num_signals = 0;
  uint32_t id = 0;

  HostNet(Bootstrap& bootstrap, size_t window_bytes, uint32_t signals_per_rank, size_t fifo_capacity,
          std::chrono::milliseconds timeout)
      : topology(one_rank_per_node(bootstrap)), bytes(window_bytes), num_signals(signals_per_rank) {
    ProxyOptions options;
    options.cuda = false;
    options.rank = topology.rank;
    options.fifo_capacity = fifo_capacity;
    options.timeout = timeout;
    proxy = std::make_unique<Proxy>(make_transport(bootstrap, topology), options);
    proxy->warm_up(bootstrap);
    window = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    const size_t signal_bytes = sizeof(uint64_t) * topology.size * num_signals;
    signals = static_cast<uint64_t*>(std::aligned_alloc(64, (signal_bytes + 63) / 64 * 64));
    std::memset(window, 0, bytes);
    std::memset(signals, 0, signal_bytes);
    ProxyWindow pw;
    pw.local = window;
    pw.bytes = bytes;
    pw.num_signals = num_signals;
    pw.data_region = proxy->transport().register_region(window, bytes, false, proxy->lock());
    pw.signal_region = proxy->transport().register_region(signals, signal_bytes, false, proxy->lock());
    id = proxy->add_window(pw);
    bootstrap.barrier();  // every window exists before anyone puts
  }
  ~HostNet() {
    proxy.reset();  // the transport closes before the memory goes
    std::free(window);
    std::free(signals);
  }

  uint64_t signal_from(int peer, uint32_t index) const {
    return __atomic_load_n(&signals[static_cast<size_t>(peer) * num_signals + index], __ATOMIC_ACQUIRE);
  }
  // Waits until signal `index` from `peer` reaches `expected`; TimeoutError naming
  // the peer, or TransportError once the proxy saw the peer fail.
  void wait_signal(int peer, uint32_t index, uint64_t expected, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    Backoff backoff;
    while (signal_from(peer, index) < expected) {
      backoff.pause();
      proxy->check();
      FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                  "rank " << topology.rank << " timed out waiting for peer rank " << peer
                          << " in phase 'wait_signal' (signal " << index << ", expected " << expected << ", saw "
                          << signal_from(peer, index) << ")");
    }
  }

  uint64_t put(int peer, size_t dst, size_t src, size_t n) { return push(FifoOp::kPut, peer, dst, src, n, 0, 0); }
  uint64_t put_with_signal(int peer, size_t dst, size_t src, size_t n, uint32_t index, uint64_t value) {
    return push(FifoOp::kPutWithSignal, peer, dst, src, n, index, value);
  }
  uint64_t signal(int peer, uint32_t index, uint64_t value) { return push(FifoOp::kSignal, peer, 0, 0, 0, index, value); }

  uint64_t push(FifoOp op, int peer, size_t dst, size_t src, size_t n, uint32_t index, uint64_t value) {
    return proxy->push(make_fifo_entry(op, id, peer, dst, src, n, index, value));
  }
};

}  // namespace ferry::net
