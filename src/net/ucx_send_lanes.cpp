// Send lanes of a tcp-only transport: see ucx_send_lanes.hpp (NOTE [Several tcp streams]).
#include "net/ucx_send_lanes.hpp"

#include <algorithm>
#include <utility>

#include "common/knobs.hpp"
#include "ferry/error.hpp"
#include "net/idle_backoff.hpp"
#include "net/ucx_endpoints.hpp"

namespace ferry::net {

struct SendLanes::Op {
  enum Kind : int { kPut = 0, kFlush = 1, kTicket = 2 };  // a ticket: a flush's handle, done with its fence
  int kind = kPut;
  int lane = 0;
  int peer = -1;
  const void* src = nullptr;
  size_t bytes = 0;
  int region = -1;
  uint64_t remote = 0;
  uint64_t fence_id = 0;
  std::atomic<int> state{0};  // 0 not done, 1 done, 2 failed (status): the lane writes it last
  ucs_status_t status = UCS_OK;
  // A small put's source, copied: after a failure the proxy counts a put finished while a lane may still send it,
  // and frees a signal's operand then; the Op itself lives on in ops_ (SendLanes::test).
  alignas(8) unsigned char small[kSmallPutBytes];
};

// NOTE [Several tcp streams]: the lane's thread is the only one that issues and progresses on its worker; others
// touch the worker (remote keys) only under worker_lock, which the thread holds while it calls UCX.
struct SendLanes::Lane {
  SendLanes* owner = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<ucp_ep_h> endpoints;                          // by rank; nullptr where not reached
  std::unordered_map<int, std::vector<ucp_rkey_h>> keys;   // by region, then rank (under worker_lock)
  std::mutex worker_lock;
  std::mutex queue_lock;
  std::vector<Op*> queue;                                   // handed over, not yet issued (under queue_lock)
  std::vector<std::pair<Op*, ucs_status_ptr_t>> in_flight;  // the thread's own
  std::atomic<bool> stop{false};
  uint64_t idle_spins = 0;
  std::thread thread;

  // A failure is recorded at once (NOTE [After a failure]: the lanes then issue nothing more), not when the proxy
  // tests the op.
  void finish(Op* op, ucs_status_t status) {
    if (status != UCS_OK && status != UCS_ERR_CANCELED) owner->record(op->peer, status, "an operation");
    op->status = status;
    op->state.store(status == UCS_OK ? 1 : 2, std::memory_order_release);
  }

  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* lane = static_cast<Lane*>(arg);
    const int peer = peer_of(lane->endpoints, ep);
    if (peer >= 0) lane->owner->record(peer, status, "the endpoint");
  }

  void issue(Op* op) {
    if (owner->failed()) return finish(op, UCS_ERR_CANCELED);  // NOTE [After a failure] (ucx_transport.cpp)
    ucp_request_param_t param{};
    ucs_status_ptr_t request = nullptr;
    if (op->kind == Op::kPut) {
      const auto found = keys.find(op->region);
      if (found == keys.end() || found->second[op->peer] == nullptr) return finish(op, UCS_ERR_INVALID_PARAM);
      param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      param.memory_type = UCS_MEMORY_TYPE_HOST;  // lanes exist on tcp alone: host memory (NOTE [Window staging])
      request = ucp_put_nbx(endpoints[op->peer], op->src, op->bytes, op->remote, found->second[op->peer], &param);
    } else {
      request = ucp_ep_flush_nbx(endpoints[op->peer], &param);  // per endpoint: its failure names the peer
    }
    if (request == nullptr) finish(op, UCS_OK);
    else if (UCS_PTR_IS_ERR(request)) finish(op, UCS_PTR_STATUS(request));
    else in_flight.emplace_back(op, request);
  }

  void run() {
    IdleBackoff backoff(idle_spins);
    std::vector<Op*> taken;
    while (!stop.load(std::memory_order_acquire)) {
      {
        std::lock_guard<std::mutex> guard(queue_lock);
        taken.swap(queue);
      }
      bool busy = !taken.empty();
      {
        std::lock_guard<std::mutex> guard(worker_lock);
        for (Op* op : taken) issue(op);
        taken.clear();
        busy = ucp_worker_progress(worker) != 0 || busy;
        for (size_t i = 0; i < in_flight.size();) {
          const ucs_status_t status = ucp_request_check_status(in_flight[i].second);
          if (status == UCS_INPROGRESS) {
            ++i;
            continue;
          }
          ucp_request_free(in_flight[i].second);
          finish(in_flight[i].first, status);
          in_flight[i] = in_flight.back();
          in_flight.pop_back();
          busy = true;
        }
      }
      backoff.after_loop(busy);
    }
    std::lock_guard<std::mutex> guard(worker_lock);
    for (auto& [op, request] : in_flight) {  // at shutdown: the ops are the owner's, left as they are
      if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(worker, request);
      ucp_request_free(request);
    }
    in_flight.clear();
  }
};

SendLanes::SendLanes(ucp_context_h context, const std::vector<std::vector<std::string>>& addresses,
                     bool peer_failure, int rank) {
  const uint64_t idle_spins = knobs::kProxyIdleSpins.value();
  try {
    for (const std::vector<std::string>& targets : addresses) {
      auto lane = std::make_unique<Lane>();
      lane->owner = this;
      lane->idle_spins = idle_spins;
      ucp_worker_params_t params{};
      params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
      params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // its thread, or another under worker_lock
      const ucs_status_t created = ucp_worker_create(context, &params, &lane->worker);
      FERRY_CHECK(created == UCS_OK, Error, "ucp_worker_create (a send lane) failed: " << ucs_status_string(created));
      Lane& made = *lane;
      lanes_.push_back(std::move(lane));
      made.endpoints.assign(targets.size(), nullptr);
      for (size_t r = 0; r < targets.size(); ++r) {
        if (targets[r].empty()) continue;
        bool refused = false;  // tcp never refuses peer-failure handling
        made.endpoints[r] = connect_endpoint(made.worker, targets[r].data(), peer_failure, &Lane::on_error, &made,
                                             rank, static_cast<int>(r), refused);
      }
    }
    for (auto& lane : lanes_) {
      Lane* l = lane.get();
      l->thread = std::thread([l] { l->run(); });
    }
  } catch (...) {
    stop();
    release();
    throw;
  }
  world_ = addresses.empty() ? 0 : addresses[0].size();
  dirty_.assign(lanes_.size() * world_, false);
}

SendLanes::~SendLanes() {
  stop();
  release();
}

void SendLanes::release() noexcept {
  for (auto& lane : lanes_) {
    for (auto& [region, keys] : lane->keys)
      for (ucp_rkey_h key : keys)
        if (key != nullptr) ucp_rkey_destroy(key);
    lane->keys.clear();
    for (ucp_ep_h endpoint : lane->endpoints) close_by_force(lane->worker, endpoint);
    lane->endpoints.clear();
    if (lane->worker != nullptr) ucp_worker_destroy(lane->worker);
    lane->worker = nullptr;
  }
}

void SendLanes::stop() noexcept {
  for (auto& lane : lanes_) lane->stop.store(true, std::memory_order_release);
  for (auto& lane : lanes_)
    if (lane->thread.joinable()) lane->thread.join();
}

void SendLanes::add_keys(int region, const std::vector<std::string>& packed) {
  for (auto& lane : lanes_) {
    std::lock_guard<std::mutex> guard(lane->worker_lock);
    std::vector<ucp_rkey_h>& keys = lane->keys[region];
    keys.assign(lane->endpoints.size(), nullptr);
    for (size_t r = 0; r < keys.size() && r < packed.size(); ++r) {
      if (lane->endpoints[r] == nullptr || packed[r].empty()) continue;
      const ucs_status_t unpacked = ucp_ep_rkey_unpack(lane->endpoints[r], packed[r].data(), &keys[r]);
      FERRY_CHECK(unpacked == UCS_OK, Error,
                  "UCX call ucp_ep_rkey_unpack (a send lane) failed: " << ucs_status_string(unpacked) << " (rank "
                                                                         << r << ")");
    }
  }
}

void SendLanes::drop_keys(int region) {
  for (auto& lane : lanes_) {
    std::lock_guard<std::mutex> guard(lane->worker_lock);
    const auto found = lane->keys.find(region);
    if (found == lane->keys.end()) continue;
    for (ucp_rkey_h key : found->second)
      if (key != nullptr) ucp_rkey_destroy(key);
    lane->keys.erase(found);
  }
}

SendLanes::Op* SendLanes::make(int kind) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  Op* raw = op.get();
  ops_.emplace(raw, std::move(op));
  return raw;
}

void* SendLanes::put(int peer, const void* src, size_t bytes, int region, uint64_t remote_address) {
  if (failed()) return nullptr;
  // NOTE [Several tcp streams]: small puts (signal words) keep one lane, so one word's totals land in order, and wait
  // for the fences before them; data never waits for a fence.
  const bool small = bytes <= kSmallPutBytes;
  Op* op = make(Op::kPut);
  op->lane = small ? 0 : static_cast<int>(next_lane_++ % lanes_.size());
  op->peer = peer;
  op->src = small ? std::memcpy(op->small, src, bytes) : src;
  op->bytes = bytes;
  op->region = region;
  op->remote = remote_address;
  if (!small) {
    hand_over(op);
    return op;
  }
  waiting_.push_back({op, fences_issued_});
  drain();
  return op;
}

// NOTE [Eager fences]: a fence's flushes go to their lanes when the fence is issued, so each covers only the puts
// before it. (Flushing at the moment the fence before it completed, as first built, also covered every data put
// issued meanwhile: under a steady stream of pieces each signal waited for the data after it too.) The fences
// complete in issue order: a flush completes only after the operations before it on its (lane, peer).
void SendLanes::fence() {
  if (failed()) return;
  Fence issued{++fences_issued_, {}};
  for (size_t i = 0; i < dirty_.size(); ++i) {  // every (lane, peer) used since the last fence
    if (!dirty_[i]) continue;
    dirty_[i] = false;
    Op* flush = make(Op::kFlush);
    flush->lane = static_cast<int>(i / world_);
    flush->peer = static_cast<int>(i % world_);
    issued.flushes.push_back(flush);
    submit(flush);
  }
  fences_.push_back(std::move(issued));
  drain();
}

void* SendLanes::flush() {
  if (failed()) return nullptr;
  fence();
  Op* ticket = make(Op::kTicket);
  ticket->fence_id = fences_issued_;
  return ticket;
}

// Retires the fences whose flushes all completed, in issue order, then hands the small puts whose fences are done to
// lane 0 in order.
bool SendLanes::drain() {
  const auto completed = [](const Fence& fence) {
    return std::all_of(fence.flushes.begin(), fence.flushes.end(),
                       [](const Op* flush) { return flush->state.load(std::memory_order_acquire) != 0; });
  };
  bool changed = false;
  while (!fences_.empty() && completed(fences_.front())) {
    Fence& oldest = fences_.front();
    for (Op* flush : oldest.flushes) {
      if (flush->state.load(std::memory_order_acquire) == 2) record(flush->peer, flush->status, "a flush");
      ops_.erase(flush);
    }
    fences_done_ = oldest.id;
    fences_.pop_front();
    changed = true;
  }
  while (!failed() && !waiting_.empty() && waiting_.front().after_fence <= fences_done_) {
    hand_over(waiting_.front().op);
    waiting_.pop_front();
    changed = true;
  }
  if (failed()) waiting_.clear();  // NOTE [After a failure]: nothing more is handed over (the ops stay in ops_)
  return changed;
}

void SendLanes::hand_over(Op* op) {
  dirty_[op->lane * world_ + op->peer] = true;
  submit(op);
}

void SendLanes::submit(Op* op) {
  Lane& lane = *lanes_[op->lane];
  std::lock_guard<std::mutex> guard(lane.queue_lock);
  lane.queue.push_back(op);
}

bool SendLanes::progress() { return drain(); }

bool SendLanes::test(void* request) {
  if (request == nullptr) return true;
  drain();
  Op* op = static_cast<Op*>(request);
  if (op->kind == Op::kTicket) {
    if (fences_done_ < op->fence_id) return failed();  // a failure counts as finished
    ops_.erase(op);
    return true;
  }
  const int state = op->state.load(std::memory_order_acquire);
  if (state == 0) return failed();  // kept in ops_: a lane may still hold it
  if (state == 2) record(op->peer, op->status, "a request");
  ops_.erase(op);
  return true;
}

void SendLanes::cancel(void* request) {
  if (request == nullptr) return;
  stop();
  waiting_.clear();
  ops_.erase(static_cast<Op*>(request));
}

void SendLanes::record(int peer, ucs_status_t status, const char* what) {
  std::lock_guard<std::mutex> guard(failure_lock_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = failure_text(what, peer, status) + " (a send lane)";
  failed_peer_ = peer;
  failed_.store(true, std::memory_order_release);
}

int SendLanes::failed_peer() const {
  std::lock_guard<std::mutex> guard(failure_lock_);
  return failed_peer_;
}

std::string SendLanes::failure() const {
  std::lock_guard<std::mutex> guard(failure_lock_);
  return failure_;
}

}  // namespace ferry::net
