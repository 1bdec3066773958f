// Whether the tcp-only endpoints of a transport connect again, and how: one decision every rank makes alike from
// every rank's wish (gathered through the bootstrap). Plain C++, no UCX: ucx_transport.cpp uses it, and the unit
// tests check it on any build.
#pragma once

#include <sched.h>

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
  uint8_t streams = 1;     // FERRY_UCX_TCP_STREAMS, else auto_tcp_streams (NOTE [Several tcp streams])
};

// NOTE [tcp streams by default]
// FERRY_UCX_TCP_STREAMS unset (0): each stream is a send thread and a receive thread at every rank, besides the
// proxy, and they spin while traffic flows, so a rank takes one stream per 4 CPUs it has (the CPUs this process may
// run on, shared by the ranks on the machine), at least 1, at most 4: 4 on the 2xH200 host (32 CPUs, 2 ranks),
// 1 on a 2-core CI machine. Measured there (session 45 c4, 2 ranks as 2 virtual nodes, ferry-bench ep --aligned,
// NCCL's sockets in the same run): 4 streams with eager fences against 1 stream, EP over tcp 2.2 / 2.7 / 2.2x as
// fast (high-throughput dispatch bf16 / fp8, combine; low latency 1.5 / 1.0 / 1.5x), AllReduce 2.3 / 2.1x at
// 16 / 64 MB, 1.2x at 1 MB, but 0.74x at 256 KB (203 against 151 us: still 1.3x NCCL's).
inline int auto_tcp_streams(int usable_cpus, int ranks_on_host) {
  return std::clamp(usable_cpus / std::max(ranks_on_host, 1) / 4, 1, 4);
}

// The CPUs this process may run on (its affinity mask), at least 1.
inline int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(CPU_COUNT(&set), 1);
}

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
