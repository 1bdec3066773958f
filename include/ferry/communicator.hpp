// Communicator: one process (one GPU) tied to its group. Owns the topology, the
// symmetric heap and the device error state that every spin-wait reports into.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/topology.hpp"
#include "ferry/device/timeout.cuh"

namespace ferry {

class SymmetricHeap;
namespace net {
class Proxy;
}

struct CommunicatorOptions {
  // CUDA device to use. -1: keep the device the caller already made current (a
  // current CUDA context exists), else its index among the ranks of its machine
  // modulo the device count (NOTE [Device of a rank], communicator.cpp).
  int device = -1;
  // Deadline of every device spin-wait. 0: FERRY_TIMEOUT_MS from the environment,
  // else 10 s.
  std::chrono::milliseconds timeout{0};
  // Descriptors the proxy FIFO holds (ranks in several nodes only). 0:
  // FERRY_PROXY_FIFO_ENTRIES from the environment, else 1024.
  size_t proxy_fifo_entries = 0;
};


class Communicator {
 public:
  Communicator(std::shared_ptr<Bootstrap> bootstrap, CommunicatorOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return topology_.rank; }
  int size() const { return topology_.size; }
  int local_rank() const { return topology_.local_rank; }
  int local_size() const { return topology_.local_size; }
  int device() const { return device_; }
  const Topology& topology() const { return topology_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  SymmetricHeap& heap() { return *heap_; }
  // The CPU proxy that carries transfers to ranks of other nodes (UCX); nullptr
  // when every rank shares this node. An internal type: Window and the
  // collectives use it.
  net::Proxy* proxy() const { return proxy_.get(); }
  // True when every rank of another node is reached over tcp alone (UCX's choice
  // of transports): many small puts then cost more than a few large ones.
  bool reaches_other_nodes_over_tcp_only() const;
  int num_sms() const { return num_sms_; }
  // Ranks of this communicator whose process drives the same GPU as this one
  // (1 on a normal node; more where ranks share GPUs: MPS, test beds).
  int ranks_sharing_device() const { return ranks_sharing_device_; }
  // NOTE [SM budget]: the SMs one rank's communication kernels may fill, the
  // same on every rank: min over ranks of (SMs / ranks sharing that GPU). Blocks
  // of one rank spin on flags that blocks of other ranks write; where ranks share
  // a GPU and run concurrently (MPS), grids of all of them must be resident at
  // once, else the first grid to arrive holds every SM and waits for blocks that
  // never start. With one rank per GPU it is the GPU's SM count (min over ranks:
  // blocks pair by index across ranks, so every rank must launch as many).
  int sm_budget() const { return sm_budget_; }
  uint64_t timeout_ns() const { return timeout_ns_; }

  // Device-visible error record (host-mapped). Kernels report timeouts here.
  DeviceErrorState* device_error_state() const { return device_error_; }
  // Device-memory flag every device wait polls; set on the first timeout.
  int32_t* device_abort_flag() const { return device_abort_; }

  // Throws AbortedError if the communicator was aborted, or TimeoutError (and
  // aborts) if a kernel recorded a timeout. Cheap: reads host-mapped memory.
  void check() const;
  // Synchronizes `stream`, then check().
  void synchronize(cudaStream_t stream) const;
  bool aborted() const;
  // Marks the communicator unusable; every later operation throws AbortedError.
  void abort(const std::string& reason) const;

 private:
  std::shared_ptr<Bootstrap> bootstrap_;
  Topology topology_;
  int device_ = 0;
  int num_sms_ = 0;
  int ranks_sharing_device_ = 1;
  int sm_budget_ = 0;
  uint64_t timeout_ns_ = 0;
  DeviceErrorState* device_error_ = nullptr;  // cudaHostAlloc(mapped)
  int32_t* device_abort_ = nullptr;           // cudaMalloc
  mutable bool aborted_ = false;
  mutable std::string abort_reason_;
  std::unique_ptr<SymmetricHeap> heap_;
  std::unique_ptr<net::Proxy> proxy_;  // destroyed before the heap (it may have registered heap memory)
};

}  // namespace ferry
