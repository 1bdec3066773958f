// The network transport the proxy drives: one-sided puts into regions every
// rank registered, with fence and flush. One implementation,
// UCX's UCP API (ucx_transport.cpp); built without UCX, make_transport throws.
// Only the proxy thread issues operations; registration runs on the caller's
// thread and takes the proxy's lock around its UCX calls (Proxy::Lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/topology.hpp"

namespace ferry::net {

// An operation still in flight; nullptr when it completed at once.
using Request = void*;

class Transport {
 public:
  virtual ~Transport() = default;

  // Names the transports UCX chose for remote peers, e.g. "tcp/lo" (for logs).
  virtual std::string describe() const = 0;
  // True when UCX moves CUDA memory on the chosen transports (RDMA with
  // GPUDirect): windows are then registered in GPU memory, else
  // staged through pinned host memory. Read from UCX, not configured.
  virtual bool moves_cuda_memory() const = 0;
  // True when endpoints were created with peer-failure handling (NOTE
  // [Peer-failure handling and tcp], ucx_transport.cpp).
  virtual bool detects_peer_failure() const = 0;
  // The largest single put this transport moves best, or 0 for no preference;
  // the proxy takes it unless FERRY_PROXY_PUT_CHUNK_BYTES is set (NOTE [Put
  // pieces over tcp], ucx_transport.cpp).
  virtual size_t preferred_put_chunk() const { return 0; }
  // True when every remote endpoint moves data over tcp alone (no RDMA, no
  // shared memory, no cuda_ipc lane).
  virtual bool remote_lanes_all_tcp() const { return false; }
  // True when the peers' puts land through a worker that a thread of its own
  // progresses (NOTE [A receive worker for tcp], ucx_receive_worker.hpp).
  virtual bool receives_on_own_thread() const { return false; }
  // tcp connections to each peer, each with a sending and a receiving thread of
  // its own (NOTE [Several tcp streams], ucx_send_lanes.hpp); 1 elsewhere.
  virtual int tcp_streams() const { return 1; }

  // Collective (every rank, same order): registers [ptr, ptr + bytes) and
  // exchanges its remote key with every peer of another node. Returns the
  // region id, the same on every rank. `lock` guards the worker against the
  // proxy thread; it is released while waiting for peers.
  virtual int register_region(void* ptr, size_t bytes, bool cuda_memory, std::mutex& lock) = 0;
  // Collective, like register_region, for `bytes` of host memory UCX allocates
  // itself (UCP_MEM_MAP_ALLOCATE): its shared-memory transports can map such
  // memory into a peer's address space (peer_pointer), which they refuse for
  // user memory (docs/internode.md Part 5). *ptr: the local memory, zeroed;
  // released with the transport.
  virtual int allocate_region(size_t bytes, void** ptr, std::mutex& lock) = 0;
  // This process's pointer to `peer`'s part of `region` (ucp_rkey_ptr), or
  // nullptr where the transport cannot map it (tcp, RDMA, user memory).
  virtual void* peer_pointer(int peer, int region) const = 0;
  // Local: drops the region (its remote keys and registration).
  virtual void deregister_region(int region) = 0;

  // True when `peer` is reached through this transport (a rank of another node).
  virtual bool reaches(int peer) const = 0;

  // Non-blocking operations. `src` stays valid and unchanged until the
  // returned request completes (test()).
  virtual Request put(int peer, const void* src, size_t bytes, int region, size_t offset, bool cuda_source) = 0;
  // Orders every operation issued before it before every put of at most 64
  // bytes (a signal word) after it, per target: never lets a signal overtake
  // the data before it. Larger puts after it may overtake it (several tcp
  // streams do: NOTE [Several tcp streams]).
  virtual void fence() = 0;
  // Completes, at their targets, every operation issued before it.
  virtual Request flush() = 0;

  // Drives the transport; returns true if anything happened.
  virtual bool progress() = 0;
  // True once `request` finished (then it is released); throws nothing: a
  // failed request sets failed() and counts as finished.
  virtual bool test(Request request) = 0;
  // Cancels and releases a request at shutdown.
  virtual void cancel(Request request) = 0;

  // The first failure (a peer that died, a refused operation), if any.
  virtual bool failed() const = 0;
  virtual int failed_peer() const = 0;
  virtual std::string failure() const = 0;
};

// A UCX transport over `bootstrap` (worker addresses exchanged through it) to
// every rank of another node. Throws NotSupported when ferry was built without
// UCX, saying how to enable it.
std::unique_ptr<Transport> make_transport(Bootstrap& bootstrap, const Topology& topology);

// True when this build has a transport (ferry was built with UCX).
bool transport_available();

}  // namespace ferry::net
