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
  uint8_t drop_asked;      // FERRY_UCX_PEER_FAILURE=auto: drop the handling on tcp alone
  uint8_t receive_thread;  // FERRY_UCX_RECEIVE_THREAD
  uint8_t streams = 1;     // FERRY_UCX_TCP_STREAMS (NOTE [Several tcp streams], ucx_send_lanes.hpp)
};

struct TcpPlan {
  bool drop_peer_failure = false;  // NOTE [tcp without UCX's peer-failure handling] (ucx_config.cpp)
  bool receive_worker = false;     // NOTE [A receive worker for tcp] (ucx_receive_worker.hpp)
  int streams = 1;                 // with receive_worker: tcp streams per peer, each a send lane and a receive worker
};

// Nothing unless every rank with remote endpoints has them tcp alone (and some rank has any); then drop UCX's
// peer-failure handling where every rank has it and asks to drop it (FERRY_UCX_PEER_FAILURE=auto), and a receive
// worker where every rank asks for one, with as many tcp streams as the rank asking for the fewest (at least 1).
// Every field comes from every rank, so no rank decides otherwise.
inline TcpPlan plan_tcp_again(const std::vector<TcpWish>& wishes) {
  auto every = [&](auto pred) { return std::all_of(wishes.begin(), wishes.end(), pred); };
  TcpPlan plan;
  if (!every([](const TcpWish& w) { return w.kind != TcpWish::kOther; }) ||
      every([](const TcpWish& w) { return w.kind == TcpWish::kNone; }))
    return plan;
  plan.drop_peer_failure = every([](const TcpWish& w) { return w.peer_failure != 0 && w.drop_asked != 0; });
  plan.receive_worker = every([](const TcpWish& w) { return w.receive_thread != 0; });
  if (plan.receive_worker) {
    plan.streams = 255;
    for (const TcpWish& w : wishes) plan.streams = std::min<int>(plan.streams, std::max<int>(w.streams, 1));
  }
  return plan;
}

}  // namespace ferry::net
