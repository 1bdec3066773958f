// Several tcp streams per peer: send lanes, each a UCX worker with a thread of its own (NOTE [Several tcp streams]).
// Used by ucx_transport.cpp only (it includes UCX's header).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstring>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ferry::net {

// NOTE [Several tcp streams]
// Over loopback tcp one stream moves 4.1-5.1 GB/s per direction with both
// directions busy, two streams 8-10 and four ~15 (session 44 c1: ucx_perftest
// pairs, one thread each side): the bytes are copied into and out of the
// socket by the threads that progress the workers, so one stream is one
// core's copy rate. With FERRY_UCX_TCP_STREAMS=K (and the receive workers of
// NOTE [A receive worker for tcp]) each rank opens K receive workers and K send
// lanes; lane k's worker connects to every peer's receive worker k, so each
// lane is one tcp connection per peer, copied by its own thread at both ends.
// The proxy thread then only hands operations to the lanes (a queue each):
// puts go round-robin over the lanes, except small ones (at most 64 bytes: the
// proxy's signal words), which all take lane 0 in issue order: the proxy sends
// a batch's signals behind one fence (NOTE [Signals after the batch's puts]),
// and two totals of one word on two connections could land out of order.
// Ordering (the Transport contract): UCX orders nothing across workers, so a
// fence is a flush of every (lane, peer) that took an operation since the last
// fence, sent when the fence is issued (NOTE [Eager fences]), and every small
// put after the fence waits in `waiting_` (on the proxy thread) until those
// flushes, and the fences before them, completed at their targets: NOTE [Network
// signals] then holds across lanes as it did on one worker. Larger puts after
// a fence go out at once: the proxy never needs them behind a signal that was
// ahead of them (NOTE [Signals after the batch's puts]), and holding them made
// every block's put wait for the round trip of the signal before it (session
// 44 c2: 2 streams moved the proxy's exchange 2.3x faster but the AllReduce
// only 1.01-1.05x). A flush (the proxy's quiet) is a fence whose completion is
// the request; it covers every put issued before it, those that went out at once
// too. The proxy cuts puts into pieces of 1 MiB here (preferred_put_chunk), so one
// block's put also spreads over the lanes.
// Measured (2xH200, one virtual node per GPU, loopback tcp, NCCL's sockets in
// the same run): session 44 c3 found 4 streams 0.43 / 0.63 of one stream's
// AllReduce time at 16 / 64 MB, but the EP over tcp apparently 1.15-1.95x slower.
// That was the EP bench's measure, not the EP: session 45's trace (c3) showed the
// 2 ranks in anti-phase, each op's max over ranks nearly a whole (dispatch,
// combine) iteration (NOTE [EP bench: aligned ops], bench/ep_align.hpp). With
// every op started together (ferry-bench ep --aligned, c4) 4 streams made the EP
// 1.5-2.7x faster than 1 (high-throughput dispatch bf16 8.7 ms against 16.5,
// 3.5x NCCL's sockets), and eager fences 1.1-1.2x more (NOTE [Eager fences]).
// So the default takes several streams where the CPUs allow (NOTE [tcp streams by
// default], tcp_plan.hpp). Tried and measured worse (session 44 c4): 4 MiB
// pieces, lane 0 on the proxy thread, puts under 2 MiB on lane 0.
class SendLanes {
 public:
  // K = addresses.size() lanes on `context` (made with mt_workers_shared); lane k connects to addresses[k][r], the
  // receive worker k of rank r (empty: not reached). Throws ferry::Error naming the ranks.
  SendLanes(ucp_context_h context, const std::vector<std::vector<std::string>>& addresses, bool peer_failure,
            int rank);
  ~SendLanes();  // stop(), then keys, endpoints and workers
  SendLanes(const SendLanes&) = delete;
  SendLanes& operator=(const SendLanes&) = delete;

  static constexpr size_t kSmallPutBytes = 64;

  int count() const { return static_cast<int>(lanes_.size()); }
  // Region `region`'s remote keys (packed[r]: rank r's packed key, empty where not reached) on every lane.
  void add_keys(int region, const std::vector<std::string>& packed);
  void drop_keys(int region);

  // The proxy thread's side (one thread): requests are this class's handles.
  void* put(int peer, const void* src, size_t bytes, int region, uint64_t remote_address);
  void fence();
  void* flush();
  bool progress();
  bool test(void* request);
  void cancel(void* request);  // at shutdown: stops the lanes first

  // A failed operation or endpoint, with the peer it names (-1: none), once.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  int failed_peer() const;
  std::string failure() const;
  // Ends the lanes' threads; nothing is sent after it returns. Idempotent.
  void stop() noexcept;

 private:
  struct Op;
  struct Lane;
  struct Step {
    Op* op;               // a small put
    uint64_t after_fence;  // handed over once the fences up to this one completed
  };
  struct Fence {
    uint64_t id;
    std::vector<Op*> flushes;  // one per (lane, peer) it covers, submitted when the fence was issued
  };

  bool drain();
  void hand_over(Op* op);  // a put to its lane, marking (lane, peer) for the next fence
  void submit(Op* op);
  void record(int peer, ucs_status_t status, const char* what);
  Op* make(int kind);
  void release() noexcept;  // after stop(): keys, endpoints, workers

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unordered_map<Op*, std::unique_ptr<Op>> ops_;  // every operation not yet tested complete
  std::deque<Step> waiting_;                          // small puts behind a fence that has not completed
  std::deque<Fence> fences_;                          // issued, not yet completed (NOTE [Eager fences])
  std::vector<bool> dirty_;                           // by (lane, peer): took an operation since the last fence
  uint64_t fences_issued_ = 0, fences_done_ = 0;
  size_t next_lane_ = 0;
  size_t world_ = 0;  // ranks: endpoints per lane
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_lock_;
  int failed_peer_ = -1;
  std::string failure_;
};

}  // namespace ferry::net
