// What ferry asks of UCX's configuration and how it reads UCX's transports (ucx_transport.cpp).
#include "net/ucx_config.hpp"

#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/error.hpp"

namespace ferry::net {

// NOTE [tcp segments]
// With peer-failure handling (FERRY_UCX_PEER_FAILURE, on by default) UCX 1.22
// has no zero-copy put over tcp: it emulates each put with active messages of
// one segment each (UCX_PROTO_INFO: "software emulation"), and its default
// 8 KB segment caps the put rate. Loopback tcp on the 2-core CPU host, 1 MiB
// puts (docs/results/net_cpu_2cores_tcp_segments.txt, noisy: 2 processes on 2
// cores): ucx_perftest -t ucp_put_bw -e 1.8-2.0 GB/s at 8K in every run, 3.1-5.4
// at 64K (zero-copy without -e: 5.0-7.6); ferry-bench net 0.70-1.45 GB/s at 8K,
// 1.01-2.79 at 64K. Not yet measured on the GPU machines. So the
// transport asks for 64K segments (FERRY_UCX_TCP_SEG_SIZE) unless the user set
// UCX_TCP_TX_SEG_SIZE or UCX_TCP_RX_SEG_SIZE (every rank applies the same rule,
// so sizes match where the environment does). FERRY_UCX_TCP_SEG_SIZE=0 keeps
// UCX's own sizes.
std::string set_tcp_segments(ucp_config_t* config) {
  const uint64_t bytes = tcp_segment_bytes();
  if (bytes == 0) return "";
  const std::string size = std::to_string(bytes);
  for (const char* name : {"TCP_TX_SEG_SIZE", "TCP_RX_SEG_SIZE"}) {
    const ucs_status_t status = ucp_config_modify(config, name, size.c_str());
    FERRY_CHECK(status == UCS_OK, InvalidArgument,
                "FERRY_UCX_TCP_SEG_SIZE=" << size << ": UCX refuses it for " << name << " ("
                                          << ucs_status_string(status) << ")");
  }
  return size + " B";
}

// NOTE [Peer-failure handling and tcp]
// Endpoints ask UCX for peer-failure handling (UCP_ERR_HANDLING_MODE_PEER) so
// that a dead peer fails its requests instead of the process. RDMA transports
// (rc/dc) support the mode in hardware and should keep their zero-copy puts
// (not measured here: no RDMA NIC). UCX's tcp transport does not: it then runs
// every put as "software emulation" (active messages through the target's
// progress), 3-5x slower than its zero-copy tcp put (1 MiB on the 2-core CI
// machine: 1137 vs 5288 MB/s as ucx_perftest prints them, `-e` vs plain; on the
// H100 box 1.59 vs 5.30 GB/s). Shared memory refuses the mode altogether (then
// it is dropped: UcxTransport::start).
// So by default (auto) endpoints whose lanes are all tcp connect again without it
// (NOTE [tcp without UCX's peer-failure handling] below); 1 keeps it wherever
// UCX allows it, 0 never asks.
PeerFailureMode peer_failure_mode_from_env() {
  const knobs::UcxPeerFailure mode = knobs::kUcxPeerFailure.value();
  return PeerFailureMode{mode != knobs::UcxPeerFailure::kOff, mode == knobs::UcxPeerFailure::kAuto};
}

// NOTE [tcp without UCX's peer-failure handling]
// Over tcp UCX's peer-failure handling costs every put its zero-copy path (NOTE [Peer-failure handling and tcp]
// above), while a dead peer is reported without it too: UCX's tcp transport hands a broken connection to the
// worker's error handler whatever the endpoint's mode and ignores the answer (uct_tcp_ep_set_failed), and the
// worker then discards the endpoint's lanes and fails its requests (ucp_ep_set_failed: "Connection reset by
// remote peer", "Endpoint timeout"), which the proxy reports naming the peer; where nothing fails, the waits'
// timeouts name it, as over shared memory. The fault tests pass both ways (ProxyFaults.*: net_faults_tcp
// without it, net_faults_tcp_pf with it; 15 of 15 repeated runs without it, session 27). RDMA transports keep
// the mode: their zero-copy puts work with it, and without it an unhandled error is logged at the fatal level,
// which ends the process (uct_rc_verbs_handle_failure, uct_base_iface_failure_log_level; read in UCX's source,
// no RDMA NIC here). Which lanes UCX chose is known only once an endpoint exists, so by default
// (FERRY_UCX_PEER_FAILURE=auto) every rank connects with the mode, and where every rank's remote endpoints are
// tcp-only, all connect again without it: the new endpoints first, a barrier, then the old ones closed by
// force. Errors of a replaced endpoint (its peer closing its own) are not failures: on_endpoint_error ignores
// endpoints no longer in endpoints_.
// (UcxTransport::connect_tcp_again_without_peer_failure, ucx_transport.cpp.)

// NOTE [Shared memory refuses peer-failure handling, quietly]
// An endpoint asked for peer-failure handling over shared memory fails with
// UCS_ERR_UNREACHABLE, and UCX logs it as an error ("no active messages
// transport to ...: sysv/memory - no peer failure handler, ..."), once per
// endpoint, before ferry connects again without the mode (UcxTransport::start). That error is
// expected, so while the first attempt runs a UCX log handler drops error lines
// that name "no peer failure handler"; every other line goes on to UCX's own
// handlers, and a failure of the retry is logged as usual. UCX calls handlers
// newest first (ucs_log_push_handler), so this one sees each line first.
namespace {
ucs_log_func_rc_t drop_peer_failure_refusal(const char*, unsigned, const char*, ucs_log_level_t level,
                                            const ucs_log_component_config_t*, const char* format, va_list ap) {
  if (level != UCS_LOG_LEVEL_ERROR) return UCS_LOG_FUNC_RC_CONTINUE;
  char text[1024];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(text, sizeof(text), format, copy);
  va_end(copy);
  return std::strstr(text, "no peer failure handler") != nullptr ? UCS_LOG_FUNC_RC_STOP : UCS_LOG_FUNC_RC_CONTINUE;
}

}  // namespace

void push_peer_failure_refusal_filter() { ucs_log_push_handler(&drop_peer_failure_refusal); }
void pop_peer_failure_refusal_filter() { ucs_log_pop_handler(); }

// RDMA transports: with a CUDA-enabled UCX they move CUDA memory directly
// (GPUDirect), so windows are registered in GPU memory. cuda_ipc only reaches
// processes of the same host, so it counts only with FERRY_UCX_GPU_MEMORY=on
// (the same-host stand-in for GPUDirect). Its first run segfaulted: UCX typed
// the CUDA source as host memory (NOTE [GPU-memory puts]).
namespace {
bool moves_cuda(const std::string& transport, knobs::UcxGpuMemory mode) {
  static const char* const kNames[] = {"rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5",
                                       "rc_x",     "dc_x",    "ud_x",    "gga_mlx5"};
  if (mode == knobs::UcxGpuMemory::kOff) return false;
  if (mode == knobs::UcxGpuMemory::kOn && transport == "cuda_ipc") return true;
  for (const char* name : kNames)
    if (transport == name) return true;
  return false;
}
}  // namespace

EndpointTransports query_endpoint_transports(ucp_ep* endpoint, knobs::UcxGpuMemory mode) {
  EndpointTransports out;
  std::vector<ucp_transport_entry_t> entries(16);
  ucp_ep_attr_t attr{};
  attr.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
  attr.transports.entries = entries.data();
  attr.transports.num_entries = static_cast<unsigned>(entries.size());
  attr.transports.entry_size = sizeof(ucp_transport_entry_t);
  if (ucp_ep_query(endpoint, &attr) != UCS_OK) return out;
  out.queried = true;
  std::ostringstream os;
  for (unsigned i = 0; i < attr.transports.num_entries; ++i) {
    const std::string name = entries[i].transport_name ? entries[i].transport_name : "?";
    out.cuda = out.cuda || moves_cuda(name, mode);
    out.tcp = out.tcp || name == "tcp";
    os << (i ? "," : "") << name << "/" << (entries[i].device_name ? entries[i].device_name : "?");
  }
  out.text = os.str();
  return out;
}

RemoteTransports query_remote_transports(const std::vector<ucp_ep*>& endpoints, knobs::UcxGpuMemory mode) {
  RemoteTransports out;
  bool all_cuda = true, all_tcp = true;
  for (size_t r = 0; r < endpoints.size(); ++r) {
    if (endpoints[r] == nullptr) continue;
    const EndpointTransports ep = query_endpoint_transports(endpoints[r], mode);
    if (!ep.queried) {
      all_cuda = false;
      continue;
    }
    if (!out.any) out.text = ep.text;
    out.any = true;
    all_cuda = all_cuda && ep.cuda;
    all_tcp = all_tcp && ep.tcp && !ep.cuda;
    if (!ep.cuda && out.without_cuda.empty()) out.without_cuda = "rank " + std::to_string(r) + " (" + ep.text + ")";
  }
  out.all_cuda = out.any && all_cuda;
  out.all_tcp = out.any && all_tcp;
  if (!out.any) out.text = "none";
  return out;
}

}  // namespace ferry::net
