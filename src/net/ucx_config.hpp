// What ferry asks of UCX's configuration and how it reads UCX's transports (ucx_config.cpp).
// No UCX header here: ferry-bench, built with or without UCX, asks the same rule.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/knobs.hpp"

struct ucp_config;  // ucp_config_t (ucp/api/ucp_def.h)
struct ucp_ep;      // ucp_ep_h

namespace ferry::net {

// NOTE [tcp segments] (ucx_config.cpp): the tcp segment size ferry asks UCX for,
// or 0 for none (FERRY_UCX_TCP_SEG_SIZE=0, or a user who set either UCX size
// chose both: neither is touched). ferry-bench net gives ucx_perftest the same.
inline uint64_t tcp_segment_bytes() {
  if (std::getenv("UCX_TCP_TX_SEG_SIZE") != nullptr || std::getenv("UCX_TCP_RX_SEG_SIZE") != nullptr) return 0;
  return knobs::kUcxTcpSegSize.value();
}

// Sets tcp_segment_bytes() as both of UCX's tcp segment sizes in `config`
// (nothing for 0); returns what it set ("" for nothing), for describe().
std::string set_tcp_segments(ucp_config* config);

// Whether endpoints ask UCX for peer-failure handling (NOTE [Peer-failure handling and tcp]): first (auto, on),
// and whether tcp-only endpoints then connect again without it (auto; NOTE [tcp without UCX's peer-failure
// handling], ucx_config.cpp).
struct PeerFailureMode {
  bool ask = true;
  bool drop_on_tcp = true;
};
PeerFailureMode peer_failure_mode_from_env();

// While pushed, UCX's expected refusal of peer-failure handling over shared
// memory is not logged (NOTE [Shared memory refuses peer-failure handling, quietly]).
void push_peer_failure_refusal_filter();
void pop_peer_failure_refusal_filter();

// One endpoint's lanes, as ucp_ep_query reports them.
struct EndpointTransports {
  bool queried = false;  // ucp_ep_query answered
  std::string text;      // "transport/device,..."
  bool cuda = false;     // a lane moves CUDA memory in the mode asked (FERRY_UCX_GPU_MEMORY)
  bool tcp = false;      // a lane is tcp
};
EndpointTransports query_endpoint_transports(ucp_ep* endpoint, knobs::UcxGpuMemory mode);

// Every remote endpoint's lanes together (nullptr entries: peers in the node).
struct RemoteTransports {
  bool any = false;        // some endpoint answered its query
  bool all_cuda = false;   // every endpoint has a lane that moves CUDA memory
  bool all_tcp = false;    // every endpoint's lanes are tcp alone
  std::string text;        // the first answering endpoint's lanes, or "none"
  std::string without_cuda;  // the first endpoint without a CUDA lane: "rank r (lanes)", or ""
};
RemoteTransports query_remote_transports(const std::vector<ucp_ep*>& endpoints, knobs::UcxGpuMemory mode);

}  // namespace ferry::net
