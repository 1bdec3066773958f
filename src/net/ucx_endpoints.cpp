// A UCX endpoint's life in ferry's transport: see ucx_endpoints.hpp.
#include "net/ucx_endpoints.hpp"

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "ferry/error.hpp"
#include "net/ucx_config.hpp"

namespace ferry::net {

ucp_ep_h connect_endpoint(ucp_worker_h worker, const void* address, bool ask_peer_failure,
                          ucp_err_handler_cb_t on_error, void* arg, int rank, int peer, bool& peer_failure_refused) {
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  if (ask_peer_failure)
    ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_params.address = static_cast<const ucp_address_t*>(address);
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails its requests, not the process
  ep_params.err_handler.cb = on_error;
  ep_params.err_handler.arg = arg;
  ucp_ep_h endpoint = nullptr;
  if (ask_peer_failure) push_peer_failure_refusal_filter();  // NOTE [Shared memory refuses ...] (ucx_config.cpp)
  ucs_status_t created = ucp_ep_create(worker, &ep_params, &endpoint);
  if (ask_peer_failure) pop_peer_failure_refusal_filter();
  if (created == UCS_ERR_UNREACHABLE && ask_peer_failure) {
    // Shared-memory transports cannot detect a dead peer, so UCX refuses
    // peer-failure handling on them: connect without it. A dead peer is
    // then found by the waits' timeouts alone.
    ep_params.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    created = ucp_ep_create(worker, &ep_params, &endpoint);
    peer_failure_refused = true;
  }
  FERRY_CHECK(created == UCS_OK, Error,
              "UCX could not connect rank " << rank << " to rank " << peer << ": " << ucs_status_string(created)
                                            << " (UCX_TLS=" << (getenv("UCX_TLS") ? getenv("UCX_TLS") : "all")
                                            << ")");
  return endpoint;
}

int peer_of(const std::vector<ucp_ep_h>& endpoints, ucp_ep_h endpoint) {
  for (size_t r = 0; r < endpoints.size(); ++r)
    if (endpoints[r] == endpoint) return static_cast<int>(r);
  return -1;
}

std::string failure_text(const char* what, int peer, ucs_status_t status) {
  std::ostringstream os;
  os << "UCX: " << what;
  if (peer >= 0) os << " to rank " << peer;
  os << " failed: " << ucs_status_string(status);
  return os.str();
}

void close_by_force(ucp_worker_h worker, ucp_ep_h endpoint) noexcept {
  if (endpoint == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;  // no handshake: a peer may be gone
  ucs_status_ptr_t request = ucp_ep_close_nbx(endpoint, &param);
  if (UCS_PTR_IS_PTR(request)) {
    // A forced close completes locally; the bound only keeps a teardown from hanging on a UCX surprise
    // (the worker's destruction releases what is left).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ucp_request_check_status(request) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline)
      ucp_worker_progress(worker);
    ucp_request_free(request);
  }
}

}  // namespace ferry::net
