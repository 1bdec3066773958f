// A second UCX worker that only receives, progressed by a thread of its own
// (NOTE [A receive worker for tcp]). Used by ucx_transport.cpp only (it includes UCX's header).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace ferry::net {

// NOTE [A receive worker for tcp]
// Over tcp a put's bytes land only while the target's worker is progressed: a
// thread of the target reads them off the socket into the region. With one
// worker per rank the proxy thread both sends its puts (the kernel copies them
// into the socket) and receives its peers' (copies them out), so when every
// rank puts at once (an AllReduce step, an EP dispatch) each direction gets
// about half of one thread's copy rate: 2.0-3.0 GB/s per direction over
// loopback on the 1xH200 host (session 43 c1: ferry-bench net --both-ways and
// --exchange, 4-64 MiB), where two ucx_perftest pairs in opposite directions,
// each process one thread, move 4.4-5.5 GB/s each at once (c2). So where every
// remote endpoint is tcp alone, each rank also opens this worker on the same
// context: the peers' endpoints connect to it, and its own thread progresses
// it. The proxy's worker then only sends; the acknowledgements its flushes and
// fences wait for come back on the same connections. A tcp put still counts as
// complete at a flush or fence only once the target acknowledged it, so NOTE
// [Network signals] holds as before. Lanes that are RDMA, shared memory or
// cuda_ipc write the target's memory without its thread: there nothing changes.
// Two threads' workers need a context made for them (UCX's mt_workers_shared),
// whose memory-registration lookups then take a lock: set on every context, it
// made the HT dispatch over shared memory 1.016-1.033 slower (session 43 c4, 2
// rounds). So the transport connects on a plain context first, and where every
// rank's endpoints are tcp alone and every rank asks for this worker, all ranks
// release it and start again on a shared one (once, at setup).
// FERRY_UCX_RECEIVE_THREAD=0 keeps one worker.
// The thread waits for data as the proxy waits for work (IdleBackoff, idle_backoff.hpp).
class ReceiveWorker {
 public:
  // Creates the worker on `context` (made with mt_workers_shared) and starts its thread; throws ferry::Error.
  explicit ReceiveWorker(ucp_context_h context);
  ~ReceiveWorker();  // stop(), then the worker's destruction
  ReceiveWorker(const ReceiveWorker&) = delete;
  ReceiveWorker& operator=(const ReceiveWorker&) = delete;

  // The worker's address, for the peers' endpoints.
  const std::string& address() const { return address_; }
  // Ends the thread: nothing lands in this rank's regions after it returns. Idempotent.
  void stop() noexcept;

 private:
  void run();

  ucp_worker_h worker_ = nullptr;
  std::string address_;
  uint64_t idle_spins_;  // FERRY_PROXY_IDLE_SPINS, read here (a bad value throws on the caller's thread)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ferry::net
