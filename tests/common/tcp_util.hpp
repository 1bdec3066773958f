// Helpers for the TcpBootstrap tests, in one process (unit) and across processes
// (mp). No MPI, no CUDA.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "ferry/bootstrap.hpp"

namespace ferry::testing {

// A loopback port that was free a moment ago.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// TcpBootstrapOptions with every wait bounded by `timeout`.
inline TcpBootstrapOptions with_timeout(std::chrono::milliseconds timeout) {
  TcpBootstrapOptions options;
  options.timeout = timeout;
  return options;
}

}  // namespace ferry::testing
