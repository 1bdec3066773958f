// Whether the tcp-only endpoints of a transport connect again, and how: one decision every rank makes alike from
// every rank's wish (gathered through the bootstrap). Plain C++, no UCX: ucx_transport.cpp uses it, and the unit
// tests check it on any build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ferry::net {

// What one rank's endpoints are and ask for.
struct TcpWish {
  enum : uint8_t { kOther = 0, kTcp = 1, kNone = 2 };
  uint8_t kind;            // this rank's remote endpoints: some lane not tcp, tcp alone, none
  uint8_t peer_failure;    // its endpoints have UCX's peer-failure handling
  uint8_t receive_thread;  // FERRY_UCX_RECEIVE_THREAD
};

struct TcpPlan {
  bool drop_peer_failure = false;  // NOTE [tcp without UCX's peer-failure handling] (ucx_config.cpp)
  bool receive_worker = false;     // NOTE [A receive worker for tcp] (ucx_receive_worker.hpp)
};

// Nothing unless every rank with remote endpoints has them tcp alone (and some rank has any); then drop UCX's
// peer-failure handling where drop_peer_failure (FERRY_UCX_PEER_FAILURE=auto) and every rank has it, and a receive
// worker where every rank asks for one.
inline TcpPlan plan_tcp_again(const std::vector<TcpWish>& wishes, bool drop_peer_failure) {
  auto every = [&](auto pred) { return std::all_of(wishes.begin(), wishes.end(), pred); };
  TcpPlan plan;
  if (!every([](const TcpWish& w) { return w.kind != TcpWish::kOther; }) ||
      every([](const TcpWish& w) { return w.kind == TcpWish::kNone; }))
    return plan;
  plan.drop_peer_failure = drop_peer_failure && every([](const TcpWish& w) { return w.peer_failure != 0; });
  plan.receive_worker = every([](const TcpWish& w) { return w.receive_thread != 0; });
  return plan;
}

}  // namespace ferry::net
