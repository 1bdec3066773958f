// How the transport's own threads (the proxy, the receive worker) wait for work: spin while it comes, yield after a
// few idle loops, and nap 20 us at a time after `idle_spins` of them (FERRY_PROXY_IDLE_SPINS: about a fraction of a
// second without activity; 0: never nap).
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace ferry::net {

class IdleBackoff {
 public:
  explicit IdleBackoff(uint64_t idle_spins) : nap_after_(idle_spins == 0 ? ~uint64_t{0} : idle_spins) {}

  // After each loop: `busy` when it did something.
  void after_loop(bool busy) {
    if (busy) {
      idle_ = 0;
    } else if (++idle_ > nap_after_) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    } else if (idle_ > kSpinsBeforeYield) {
      std::this_thread::yield();
    }
  }

 private:
  static constexpr uint64_t kSpinsBeforeYield = 256;
  uint64_t nap_after_;
  uint64_t idle_ = 0;
};

}  // namespace ferry::net
