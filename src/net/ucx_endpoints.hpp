// A UCX endpoint's life in ferry's transport (ucx_endpoints.cpp): connecting with or without UCX's peer-failure
// handling, and closing without a handshake. Used by ucx_transport.cpp only (it includes UCX's header).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <vector>

namespace ferry::net {

// An endpoint from `worker` to the worker at `address` (rank `peer`; `rank` is this one, for the error). With
// ask_peer_failure it asks for UCX's peer-failure handling with `on_error(arg, ...)`; where UCX refuses the mode
// (shared memory) it connects without it and sets peer_failure_refused. Throws ferry::Error naming both ranks.
ucp_ep_h connect_endpoint(ucp_worker_h worker, const void* address, bool ask_peer_failure,
                          ucp_err_handler_cb_t on_error, void* arg, int rank, int peer, bool& peer_failure_refused);

// Closes `endpoint` without a handshake (a peer may be gone), progressing `worker` for at most 5 s.
void close_by_force(ucp_worker_h worker, ucp_ep_h endpoint) noexcept;

// What one rank's endpoints are and ask for, gathered from every rank before the tcp-only ones connect again.
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
// The same on every rank: nothing unless every rank with remote endpoints has them tcp alone; then drop the
// handling where drop_peer_failure (auto) and every rank has it, and a receive worker where every rank asks.
TcpPlan plan_tcp_again(const std::vector<TcpWish>& wishes, bool drop_peer_failure);

}  // namespace ferry::net
