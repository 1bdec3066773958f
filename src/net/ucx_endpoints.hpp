// A UCX endpoint's life in ferry's transport (ucx_endpoints.cpp): connecting with or without UCX's peer-failure
// handling, and closing without a handshake. Used by ucx_transport.cpp only (it includes UCX's header).
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

namespace ferry::net {

// An endpoint from `worker` to the worker at `address` (rank `peer`; `rank` is this one, for the error). With
// ask_peer_failure it asks for UCX's peer-failure handling with `on_error(arg, ...)`; where UCX refuses the mode
// (shared memory) it connects without it and sets peer_failure_refused. Throws ferry::Error naming both ranks.
ucp_ep_h connect_endpoint(ucp_worker_h worker, const void* address, bool ask_peer_failure,
                          ucp_err_handler_cb_t on_error, void* arg, int rank, int peer, bool& peer_failure_refused);

// The rank whose endpoint `endpoint` is in `endpoints` (by rank), or -1 (an endpoint replaced at start).
int peer_of(const std::vector<ucp_ep_h>& endpoints, ucp_ep_h endpoint);

// "UCX: <what> to rank <peer> failed: <status>" (no rank where peer < 0): every failure the transport records.
std::string failure_text(const char* what, int peer, ucs_status_t status);

// Closes `endpoint` without a handshake (a peer may be gone), progressing `worker` for at most 5 s.
void close_by_force(ucp_worker_h worker, ucp_ep_h endpoint) noexcept;

}  // namespace ferry::net
