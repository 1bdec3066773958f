// Window: a symmetric buffer for GPU-initiated transfers (the device API in
// include/ferry/device/channel.cuh). Every rank of the communicator creates it
// with the same size, in the same order; a kernel then puts into any rank's
// window and signals it, over NVLink for a peer in the node and through the
// CPU proxy and UCX for a peer in another node:
//
//   ferry::Window window(comm, bytes);                       // collective
//   my_kernel<<<grid, block, 0, stream>>>(window.device());  // put / signal / wait_signal / quiet
//   comm.synchronize(stream);                                // throws if a wait timed out or a peer died
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ferry/communicator.hpp"
#include "ferry/device/channel.cuh"

namespace ferry {

struct WindowOptions {
  // Signal words per source rank (NOTE [Window signals]).
  int num_signals = 64;
};

class Window {
 public:
  // Collective over the communicator. The window and its signals start zeroed.
  Window(Communicator& comm, size_t bytes, WindowOptions options = {});
  // Collective: waits for this rank's transfers to complete, then for every rank
  // to arrive, then frees the window (skips the wait for peers once the
  // communicator was aborted).
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // What kernels take (by value).
  const DeviceWindow& device() const { return device_; }
  // This rank's window (device memory).
  void* local() const { return device_.local; }
  size_t bytes() const { return device_.bytes; }
  int num_signals() const { return device_.num_signals; }
  // True when peers of other nodes write into the device window itself (UCX
  // moves CUDA memory); false when their puts land in pinned host memory that
  // kernels read through recv_ptr (staged; tcp, shared memory). Read from UCX.
  bool network_writes_device_memory() const { return gpu_direct_; }
  // True when some peer is reached through the proxy.
  bool uses_proxy() const { return device_.fifo.entries != nullptr; }
  // True when this rank's kernels store puts to `peer` (of another node on this
  // host, over UCX shared memory) straight into its landing buffer, signals
  // through the proxy unless the kernel stores them too (NOTE [Mapped peers],
  // [Mapped signals], channel.cuh).
  bool maps_peer(int peer) const;
  // True when `peer`'s network signal words are mapped here too, so kernels that
  // own a signal word can store its total themselves (NOTE [Mapped signals]).
  bool maps_peer_signals(int peer) const;
  // Host views of where `peer`'s puts and signals land in this rank (for
  // checks from the host after a synchronize): device pointers, except the
  // staged network memory, which is host memory.
  const void* recv_ptr(int peer) const;
  const uint64_t* signals_from(int peer) const;

 private:
  struct State;
  Communicator& comm_;
  DeviceWindow device_{};
  bool gpu_direct_ = false;
  std::unique_ptr<State> state_;
};

}  // namespace ferry
