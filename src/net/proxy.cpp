// The CPU proxy thread (see proxy.hpp and NOTE [Proxy FIFO protocol]).
#include "net/proxy.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "net/idle_backoff.hpp"

namespace ferry::net {

namespace {

constexpr int kBatch = 64;              // entries handled per lock hold
constexpr size_t kMaxInFlight = 4096;   // requests before the proxy waits for the oldest

// The largest single transport put: FERRY_PROXY_PUT_CHUNK_BYTES where set, else the
// transport's preference (NOTE [Put pieces over tcp]), else the knob's default (4 MiB); at least 4 KiB.
size_t resolve_put_chunk(const ProxyOptions& options, const Transport& transport) {
  const size_t chosen = options.put_chunk_bytes.value_or(
      transport.preferred_put_chunk() > 0 ? transport.preferred_put_chunk() : knobs::kProxyPutChunkBytes.value());
  return std::max<size_t>(chosen, 4096);
}

template <typename T>
T* host_alloc(size_t count, bool cuda) {
  void* p = nullptr;
  const size_t bytes = count * sizeof(T);
  if (cuda) {
    FERRY_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  } else {
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    FERRY_CHECK(p != nullptr, Error, "out of host memory (" << bytes << " bytes)");
  }
  std::memset(p, 0, bytes);
  return static_cast<T*>(p);
}

template <typename T>
void host_free(T*& p, bool cuda) {
  if (p == nullptr) return;
  if (cuda) cudaFreeHost(p);
  else std::free(p);
  p = nullptr;
}

template <typename T>
T* device_view(T* host, bool cuda) {
  if (!cuda) return host;
  void* d = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&d, const_cast<std::remove_const_t<T>*>(host), 0));
  return static_cast<T*>(d);
}

}  // namespace

Proxy::Proxy(std::unique_ptr<Transport> transport, ProxyOptions options)
    : transport_(std::move(transport)), options_(options), put_chunk_(resolve_put_chunk(options_, *transport_)) {
  FERRY_ARG_CHECK(options_.fifo_capacity > 0, "proxy FIFO capacity must be > 0");
  const bool cuda = options_.cuda;
  if (cuda) FERRY_CUDA_CHECK(cudaSetDevice(options_.device));
  entries_ = host_alloc<FifoEntry>(options_.fifo_capacity, cuda);
  tail_ = host_alloc<uint64_t>(1, cuda);
  flushed_ = host_alloc<uint64_t>(1, cuda);
  if (cuda) {
    FERRY_CUDA_CHECK(cudaMalloc(&head_, 2 * sizeof(uint64_t)));  // head, then the producers' tail cache
    FERRY_CUDA_CHECK(cudaMemset(head_, 0, 2 * sizeof(uint64_t)));
    FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    head_ = host_alloc<uint64_t>(1, false);
  }
  fifo_.entries = device_view(entries_, cuda);
  fifo_.head = head_;
  fifo_.tail_cache = cuda ? head_ + 1 : nullptr;
  fifo_.tail = device_view(tail_, cuda);
  fifo_.flushed = device_view(flushed_, cuda);
  fifo_.capacity = options_.fifo_capacity;
  thread_ = std::thread([this] { run(); });
}

Proxy::~Proxy() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  for (InFlight& f : in_flight_) transport_->cancel(f.request);
  in_flight_.clear();
  transport_.reset();  // nothing lands in registered memory any more
  for (void* p : adopted_) cudaFreeHost(p);
  const bool cuda = options_.cuda;
  if (cuda) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (head_ != nullptr) cudaFree(head_);
    head_ = nullptr;
  } else {
    host_free(head_, false);
  }
  host_free(entries_, cuda);
  host_free(tail_, cuda);
  host_free(flushed_, cuda);
}

uint32_t Proxy::add_window(const ProxyWindow& window) {
  std::lock_guard<std::mutex> guard(lock_);
  windows_.push_back(window);
  return static_cast<uint32_t>(windows_.size() - 1);
}

void Proxy::remove_window(uint32_t id) {
  std::lock_guard<std::mutex> guard(lock_);
  if (id < windows_.size()) windows_[id].reset();
  for (auto it = signal_totals_.begin(); it != signal_totals_.end();)
    it = (it->first >> 44) == id ? signal_totals_.erase(it) : std::next(it);
}

void Proxy::adopt_host_memory(void* pinned) {
  if (pinned == nullptr) return;
  std::lock_guard<std::mutex> guard(lock_);
  adopted_.push_back(pinned);
}

uint64_t Proxy::retired() const { return load_acquire(tail_); }

std::string Proxy::failure() const {
  std::lock_guard<std::mutex> guard(failure_lock_);
  return failure_;
}

std::string Proxy::failure_report() const {
  std::ostringstream os;
  os << "inter-node transfer failed on rank " << options_.rank << " in phase '" << phase_name(kPhaseProxyTransfer)
     << "': " << failure();
  return os.str();
}

void Proxy::check() const {
  if (failed()) FERRY_THROW(TransportError, failure_report());
}

void Proxy::run() {
  if (options_.cuda) cudaSetDevice(options_.device);
  IdleBackoff backoff(options_.idle_spins);  // FIFO or network activity counts as busy
  while (!stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    {
      std::lock_guard<std::mutex> guard(lock_);
      for (auto& task : tasks_) task();
      tasks_.clear();
      for (int i = 0; i < kBatch; ++i) {
        FifoEntry* slot = entries_ + next_ticket_ % fifo_.capacity;
        if (load_acquire(&slot->seq) != next_ticket_ + 1) break;
        const FifoEntry entry = *slot;
        note_transport_failure();
        if (!failed()) {
          try {
            handle(entry, next_ticket_);
          } catch (const std::exception& e) {  // a CUDA copy or a refused operation: fail, never terminate
            note_failure(e.what(), entry.peer);
          }
        }
        store_release(&slot->seq, 0);
        ++next_ticket_;
        busy = true;
      }
      if (!held_signals_.empty()) {  // NOTE [Signals after the batch's puts]; a quiet's, handle() times
        const int64_t release_start = now_ns();
        release_signals();
        bump<int64_t>(counters_.issue_ns, now_ns() - release_start);
      }
      if (busy) store_release(tail_, next_ticket_);  // once per batch: producers poll this line
      activity_.store(kIdle, std::memory_order_relaxed);
      busy = transport_->progress() || busy;
      retire();
      note_transport_failure();
      publish_failure();
    }
    backoff.after_loop(busy);
  }
}

void Proxy::handle(const FifoEntry& entry, uint64_t ticket) {
  const int64_t start = now_ns();
  handle_entry(entry, ticket);
  bump<int64_t>(counters_.issue_ns, now_ns() - start);
  bump<uint64_t>(counters_.descriptors, 1);
}

ProxyStats Proxy::stats() const {
  ProxyStats s;
  s.descriptors = counters_.descriptors.load(std::memory_order_relaxed);
  s.puts = counters_.puts.load(std::memory_order_relaxed);
  s.signals = counters_.signals.load(std::memory_order_relaxed);
  s.fences = counters_.fences.load(std::memory_order_relaxed);
  s.completed = counters_.completed.load(std::memory_order_relaxed);
  s.issue_us = counters_.issue_ns.load(std::memory_order_relaxed) / 1e3;
  s.fence_us = counters_.fence_ns.load(std::memory_order_relaxed) / 1e3;
  s.wait_room_us = counters_.wait_room_ns.load(std::memory_order_relaxed) / 1e3;
  s.complete_us = counters_.complete_ns.load(std::memory_order_relaxed) / 1e3;
  return s;
}

void Proxy::handle_entry(const FifoEntry& entry, uint64_t ticket) {
  const auto op = static_cast<FifoOp>(entry.op);
  if (op == FifoOp::kQuiet) {
    release_signals();  // a quiet covers them too
    InFlight f;
    f.request = transport_->flush();
    f.quiet = ticket;
    keep_in_flight(std::move(f));
    return;
  }
  if (entry.window >= windows_.size() || !windows_[entry.window]) {
    std::ostringstream os;
    os << "a descriptor names window " << entry.window << ", which does not exist";
    note_failure(os.str(), entry.peer);
    return;
  }
  const ProxyWindow& window = *windows_[entry.window];
  switch (op) {
    case FifoOp::kPut: put(window, entry); break;
    case FifoOp::kPutWithSignal:
      put(window, entry);
      signal(window, entry);
      break;
    case FifoOp::kSignal: signal(window, entry); break;
    default: {
      std::ostringstream os;
      os << "a descriptor has unknown op " << entry.op;
      note_failure(os.str(), entry.peer);
    }
  }
}

void Proxy::put(const ProxyWindow& window, const FifoEntry& entry) {
  if (entry.src_offset > window.bytes || entry.bytes > window.bytes - entry.src_offset) {
    std::ostringstream os;
    os << "a put of " << entry.bytes << " bytes from offset " << entry.src_offset << " is past the "
       << window.bytes << "-byte window";
    note_failure(os.str(), entry.peer);
    return;
  }
  // NOTE [Window staging] (window.cpp): `local` is memory the transport reads
  // as it is (host memory, or device memory UCX moves): no copy here, and no
  // CUDA call on the proxy thread.
  // A large put goes out as pieces of put_chunk_: UCX then pipelines
  // them (over shared memory one 58 MB put took about 4x as long as 4 MiB pieces).
  const size_t chunk = put_chunk_;
  for (uint64_t done = 0; done < entry.bytes;) {
    const uint64_t n = std::min<uint64_t>(chunk, entry.bytes - done);
    if (!wait_for_request_room()) return;
    activity_.store(kIssuing, std::memory_order_relaxed);
    InFlight f;
    f.peer = entry.peer;
    f.request = transport_->put(entry.peer, window.local + entry.src_offset + done, n, window.data_region,
                                entry.dst_offset + done, window.local_is_cuda);
    keep_in_flight(std::move(f));
    bump<uint64_t>(counters_.puts, 1);
    bump<uint64_t>(counters_.put_bytes, n);
    bytes_since_fence_ += n;
    done += n;
  }
}

void Proxy::signal(const ProxyWindow& window, const FifoEntry& entry) {
  if (entry.signal_index >= window.num_signals) {
    std::ostringstream os;
    os << "signal index " << entry.signal_index << " is past the window's " << window.num_signals << " signals";
    note_failure(os.str(), entry.peer);
    return;
  }
  held_signals_.push_back({entry.window, entry.peer, entry.signal_index, entry.signal_value});
  if (bytes_since_fence_ >= options_.hold_signals_bytes) release_signals();
}

// NOTE [Network signals]
// Signal word (source, index) at a peer is written by one rank only, the
// source, and only through its proxy, in FIFO order. So the proxy keeps the
// word's running total and a signal is an 8-byte put of the new total: no
// remote atomic, which UCX can only emulate over tcp/shared memory, and not
// with the peer-failure handling that lets a survivor outlive a dead peer.
// The fence orders it after every put before it, and successive totals of
// one word after each other, so the word only grows and never runs ahead of
// the data it follows.
// NOTE [Signals after the batch's puts]
// UCX's fence (ucp_worker_fence) is a flush of the whole worker that waits for
// the targets (its "strong" mode, UCX's choice wherever the new protocols are
// on): a round trip, during which the proxy issues nothing. With a fence per
// signal, blocks that each put a chunk with a signal (the hierarchical
// AllReduce's 16, the cross-node EP's per-peer puts) went out one round trip at a
// time. So the proxy holds the signals of the descriptors it handles in one
// batch (those it found ready at once, at most kBatch), issues their puts as they
// come, and at the batch's end (and before a quiet) fences once and sends the
// held signals in FIFO order. Still:
//  - every signal follows every put that was before it in the FIFO (the fence
//    covers all puts issued so far);
//  - the signals keep their FIFO order, so a word's totals still only grow;
//  - a put may now go out before a signal that was ahead of it in the FIFO.
//    Without a fence between them UCX never ordered the two anyway, so no
//    protocol may rely on that signal landing first (and none does: a put into
//    an area a signal guards waits, on the GPU, for the target's answer to it).
// held_signals_ is empty whenever the proxy thread lets go of lock_ (every
// batch ends with release_signals), so windows never change under it.
void Proxy::release_signals() {
  if (held_signals_.empty()) return;
  const int64_t start = now_ns();
  try {
    transport_->fence();
    bytes_since_fence_ = 0;
    bump<int64_t>(counters_.fence_ns, now_ns() - start);
    bump<uint64_t>(counters_.fences, 1);
    for (const HeldSignal& held : held_signals_) {
      const ProxyWindow& window = *windows_[held.window];
      bump<uint64_t>(counters_.signals, 1);
      const uint64_t key = (static_cast<uint64_t>(held.window) << 44) ^ (static_cast<uint64_t>(held.peer) << 24) ^
                           held.index;
      uint64_t& total = signal_totals_[key];
      total += held.value;
      InFlight f;
      f.peer = held.peer;
      f.operand = std::make_unique<uint64_t>(total);
      const size_t word = static_cast<size_t>(options_.rank) * window.num_signals + held.index;
      f.request = transport_->put(held.peer, f.operand.get(), sizeof(uint64_t), window.signal_region,
                                  word * sizeof(uint64_t), false);
      keep_in_flight(std::move(f));
    }
  } catch (const std::exception& e) {  // a refused operation: fail, never terminate
    note_failure(e.what(), held_signals_.front().peer);
  }
  held_signals_.clear();
}

// Bounds the requests in flight: waits (progressing) until the oldest complete.
// false if the transport failed or time ran out.
bool Proxy::wait_for_request_room() {
  if (in_flight_.size() < kMaxInFlight) return true;
  struct AddWait {  // every return below
    Proxy& proxy;
    int64_t start;
    ~AddWait() { bump<int64_t>(proxy.counters_.wait_room_ns, proxy.now_ns() - start); }
  } add_wait{*this, now_ns()};
  activity_.store(kWaitingForRequests, std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (in_flight_.size() >= kMaxInFlight) {
    transport_->progress();
    retire();
    if (transport_->failed()) {
      note_failure(transport_->failure(), transport_->failed_peer());
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // The oldest request names the rank that makes no progress (a flush: none in particular).
      const int stuck = in_flight_.empty() ? -1 : in_flight_.front().peer;
      std::ostringstream os;
      os << "puts waited past the timeout for earlier ones to complete (their target";
      if (stuck >= 0) os << ", rank " << stuck << ",";
      os << " makes no progress)";
      note_failure(os.str(), stuck);
      return false;
    }
  }
  return true;
}

std::string Proxy::state() const {
  static const char* const kNames[] = {"idle", "issuing puts",
                                       "waiting for earlier puts to complete (their target makes no progress?)"};
  std::ostringstream os;
  os << "proxy on rank " << options_.rank << ": " << load_acquire(tail_) << " descriptors retired, "
     << put_bytes() << " bytes put, now "
     << kNames[activity_.load(std::memory_order_relaxed)];
  return os.str();
}

void Proxy::retire() {
  while (!in_flight_.empty() && transport_->test(in_flight_.front().request)) {
    InFlight& f = in_flight_.front();
    bump<int64_t>(counters_.complete_ns, now_ns() - f.issued_ns);
    bump<uint64_t>(counters_.completed, 1);
    if (f.quiet) {
      // A request may count as complete because the transport failed (SendLanes::test): the failure is noted
      // before the quiet is, so a caller that sees its quiet done and then checks sees the failure.
      note_transport_failure();
      store_release(flushed_, *f.quiet + 1);
    }
    in_flight_.pop_front();
  }
}

void Proxy::note_failure(const std::string& what, int peer) {
  if (failed()) return;
  {
    std::lock_guard<std::mutex> guard(failure_lock_);
    std::ostringstream os;
    os << what;
    if (peer >= 0 && what.find("rank " + std::to_string(peer)) == std::string::npos) os << " (peer rank " << peer << ")";
    failure_ = os.str();
  }
  if (options_.error != nullptr) {
    options_.error->rank = options_.rank;
    options_.error->peer = peer;
    options_.error->phase = kPhaseProxyTransfer;
    options_.error->expected = 0;
    options_.error->observed = 0;
  }
  failed_.store(true, std::memory_order_release);
}

// The transport's failure as the proxy's own, once.
void Proxy::note_transport_failure() {
  if (transport_->failed() && !failed()) note_failure(transport_->failure(), transport_->failed_peer());
}

// After a failure: tell the GPU (record, then abort flag) so its waits end now
// rather than at their timeout. Once.
void Proxy::publish_failure() {
  if (!failed() || failure_published_) return;
  failure_published_ = true;
  if (options_.error != nullptr) {
    std::atomic_thread_fence(std::memory_order_release);
    if (options_.error->code == kDeviceOk) options_.error->code = kDeviceTransportError;
  }
  if (options_.cuda && options_.device_abort != nullptr) {
    cudaMemsetAsync(options_.device_abort, 0x01, sizeof(int32_t), stream_);  // any nonzero value aborts
    cudaStreamSynchronize(stream_);
  }
}

}  // namespace ferry::net
