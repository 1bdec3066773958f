// What ferry asks of UCX's configuration before ucp_init (ucx_config.cpp).
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace ferry::net {

// NOTE [tcp segments] (ucx_config.cpp): sets UCX's tcp segment sizes in `config`
// unless the user chose them; returns what it set ("" for nothing), for describe().
std::string set_tcp_segments(ucp_config_t* config);

}  // namespace ferry::net
