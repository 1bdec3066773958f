// The proxy, as the caller's threads use it: host producers (push, quiet,
// drain) and the collective warm-ups. The proxy thread's side is proxy.cpp.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <vector>

#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "net/proxy.hpp"

namespace ferry::net {

uint64_t Proxy::push(const FifoEntry& entry) {
  FERRY_CHECK(!options_.cuda, InvalidArgument, "Proxy::push is for host FIFOs; this one takes GPU producers");
  const uint64_t ticket = std::atomic_ref<uint64_t>(*head_).fetch_add(1, std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Backoff backoff;
  while (load_acquire(tail_) + fifo_.capacity <= ticket) {
    FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                "proxy FIFO full on rank " << options_.rank << ": ticket " << ticket << " waited "
                                           << options_.timeout.count() / 1000000 << " ms for a free slot");
    backoff.pause();
  }
  FifoEntry* slot = entries_ + ticket % fifo_.capacity;
  FifoEntry copy = entry;
  copy.seq = 0;
  std::memcpy(reinterpret_cast<char*>(slot) + sizeof(uint64_t), reinterpret_cast<const char*>(&copy) + sizeof(uint64_t),
              sizeof(FifoEntry) - sizeof(uint64_t));
  store_release(&slot->seq, ticket + 1);
  return ticket;
}

void Proxy::quiet() {
  const uint64_t ticket = push(make_fifo_entry(FifoOp::kQuiet, 0, -1, 0, 0, 0, 0, 0));
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Backoff backoff;
  while (load_acquire(flushed_) <= ticket) {
    check();
    FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                "proxy quiet on rank " << options_.rank << " did not complete within "
                                       << options_.timeout.count() / 1000000 << " ms");
    backoff.pause();
  }
}

void Proxy::drain() {
  uint64_t pushed = 0;
  if (options_.cuda) {
    FERRY_CUDA_CHECK(cudaMemcpy(&pushed, head_, sizeof(pushed), cudaMemcpyDeviceToHost));
  } else {
    pushed = load_acquire(head_);
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  auto settled = [&] {
    std::lock_guard<std::mutex> guard(lock_);
    return next_ticket_ >= pushed && in_flight_.empty();
  };
  Backoff backoff;
  while (!failed() && !settled()) {
    FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                "proxy on rank " << options_.rank << " did not drain its FIFO within "
                                 << options_.timeout.count() / 1000000 << " ms");
    backoff.pause();
  }
}

void Proxy::warm_up(Bootstrap& bootstrap) {
  const int world = bootstrap.size();
  std::vector<uint64_t> words(world, 0);
  const int region = transport_->register_region(words.data(), words.size() * sizeof(uint64_t), false, lock_);
  const uint64_t value = 1;
  std::vector<Request> requests;
  {
    std::lock_guard<std::mutex> guard(lock_);
    for (int peer = 0; peer < world; ++peer) {
      if (peer == options_.rank || !transport_->reaches(peer)) continue;
      requests.push_back(transport_->put(peer, &value, sizeof(value), region, options_.rank * sizeof(uint64_t), false));
    }
    requests.push_back(transport_->flush());
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Backoff backoff;
  for (Request& request : requests) {
    while (true) {
      {
        std::lock_guard<std::mutex> guard(lock_);
        transport_->progress();
        if (transport_->test(request)) break;
      }
      FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                  "rank " << options_.rank << ": the first puts to the other nodes' ranks did not complete within "
                          << options_.timeout.count() / 1000000 << " ms");
      backoff.pause();
    }
  }
  check();
  bootstrap.barrier();  // every rank's puts landed: the region can go
  std::lock_guard<std::mutex> guard(lock_);
  transport_->deregister_region(region);
}

void Proxy::warm_up_window(uint32_t id, Bootstrap& bootstrap) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  {
    std::lock_guard<std::mutex> guard(lock_);
    tasks_.push_back([this, id, done, world = bootstrap.size()] {
      try {
        // Zeros of the new window onto the peer's zeros, in every size class
        // (UCX picks short, copy, zero-copy and rendezvous paths by size), each
        // followed by a signal of total 0.
        const uint64_t window_bytes = windows_[id]->bytes;
        for (int peer = 0; peer < world; ++peer) {
          if (peer == options_.rank || !transport_->reaches(peer)) continue;
          for (uint64_t bytes : {uint64_t{1}, uint64_t{4} << 10, uint64_t{64} << 10, uint64_t{1} << 20}) {
            handle(make_fifo_entry(FifoOp::kPutWithSignal, id, peer, 0, 0, std::min(bytes, window_bytes), 0, 0), 0);
          }
        }
        release_signals();
        Request flush = transport_->flush();
        const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
        while (!transport_->test(flush)) {
          transport_->progress();
          retire();
          FERRY_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError,
                      "rank " << options_.rank << ": the first puts into a new window did not complete within "
                              << options_.timeout.count() / 1000000 << " ms");
        }
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  finished.get();  // rethrows the task's error
  check();
  bootstrap.barrier();  // every peer's warm-up landed before anyone's kernel runs
}

}  // namespace ferry::net
