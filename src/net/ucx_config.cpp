// What ferry asks of UCX's configuration before ucp_init (ucx_transport.cpp).
#include "net/ucx_config.hpp"

#include <ucp/api/ucp.h>

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

}  // namespace ferry::net
