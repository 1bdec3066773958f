// What ferry asks of UCX's configuration before ucp_init (ucx_config.cpp).
// No UCX header here: ferry-bench, built with or without UCX, asks the same rule.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/knobs.hpp"

struct ucp_config;  // ucp_config_t (ucp/api/ucp_def.h)

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

}  // namespace ferry::net
