// Host-side pieces of the proxy tests: a window in host memory registered with
// the transport, a proxy with a host FIFO (host threads push the descriptors a
// kernel would), and the data pattern the tests check.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"
#include "ferry/topology.hpp"
#include "net/proxy.hpp"
#include "net/transport.hpp"

namespace ferry::testing {

// Every rank its own (virtual) node: all traffic takes the proxy.
inline Topology one_rank_per_node(Bootstrap& bootstrap) {
  setenv("FERRY_RANKS_PER_NODE", "1", 1);
  Topology topology = discover_topology(bootstrap);
  unsetenv("FERRY_RANKS_PER_NODE");
  return topology;
}

struct HostNet {
  Topology topology;
  std::unique_ptr<net::Proxy> proxy;
  char* window = nullptr;      // bytes, host memory: puts' source and landing
  uint64_t* signals = nullptr; // [world][num_signals]
  size_t bytes = 0;
  uint32_t num_signals = 0;
  uint32_t id = 0;

  HostNet(Bootstrap& bootstrap, size_t window_bytes, uint32_t signals_per_rank, size_t fifo_capacity,
          std::chrono::milliseconds timeout)
      : topology(one_rank_per_node(bootstrap)), bytes(window_bytes), num_signals(signals_per_rank) {
    net::ProxyOptions options;
    options.cuda = false;
    options.rank = topology.rank;
    options.fifo_capacity = fifo_capacity;
    options.timeout = timeout;
    proxy = std::make_unique<net::Proxy>(net::make_transport(bootstrap, topology), options);
    window = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    const size_t signal_bytes = sizeof(uint64_t) * topology.size * num_signals;
    signals = static_cast<uint64_t*>(std::aligned_alloc(64, (signal_bytes + 63) / 64 * 64));
    std::memset(window, 0, bytes);
    std::memset(signals, 0, signal_bytes);
    net::ProxyWindow pw;
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
    return std::atomic_ref<uint64_t>(signals[static_cast<size_t>(peer) * num_signals + index])
        .load(std::memory_order_acquire);
  }
  // Waits until signal `index` from `peer` reaches `expected`; TimeoutError naming
  // the peer, or TransportError once the proxy saw the peer fail.
  void wait_signal(int peer, uint32_t index, uint64_t expected, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    net::Backoff backoff;
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
    FifoEntry e{};
    e.op = static_cast<uint32_t>(op);
    e.window = id;
    e.peer = peer;
    e.dst_offset = dst;
    e.src_offset = src;
    e.bytes = n;
    e.signal_index = index;
    e.signal_value = value;
    return proxy->push(e);
  }
};

// The byte at `position` of the put number `iteration` from `sender` to `receiver`.
inline uint8_t pattern(int sender, int receiver, uint64_t iteration, uint64_t position) {
  uint64_t x = (static_cast<uint64_t>(sender) << 56) ^ (static_cast<uint64_t>(receiver) << 48) ^ (iteration << 24) ^
               position;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint8_t>(x);
}

// splitmix64: the sizes of the puts, reproducible by the receiver.
inline uint64_t mix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ferry::testing
