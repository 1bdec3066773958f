// Helpers for the TcpBootstrap tests, in one process (unit) and across processes
// (mp). No MPI, no CUDA.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "ferry/bootstrap.hpp"

namespace ferry::testing {

// Passes when `error` holds exactly an E whose message contains `needle`.
template <typename E>
::testing::AssertionResult threw(const std::exception_ptr& error, const std::string& needle = "") {
  if (!error) return ::testing::AssertionFailure() << "nothing was thrown";
  try {
    std::rethrow_exception(error);
  } catch (const E& e) {
    if (std::string(e.what()).find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << e.what();
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
  }
}

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

// A copy of the frame header in src/bootstrap/tcp_socket.hpp, so that raw
// sockets can send frames that are wrong in one chosen way.
struct WireHeader {
  uint32_t magic;
  uint32_t kind;
  int32_t sender;
  uint32_t reserved;
  uint64_t length;
};
constexpr uint32_t kWireMagic = 0x59525246u;
constexpr uint32_t kWireHello = 1;

// A copy of the hello payload in src/bootstrap/tcp_bootstrap.cpp.
struct WireHello {
  uint64_t id_magic;
  int32_t world_size;
  uint32_t version;
};
constexpr uint32_t kWireVersion = 1;

// The fields of a TcpUniqueId a raw peer needs (layout as in tcp_bootstrap.cpp:
// tag, flags, group magic, port, ...), so tests can speak to a root directly.
inline uint64_t id_magic(const TcpUniqueId& id) {
  uint64_t magic;
  std::memcpy(&magic, id.bytes.data() + 8, sizeof magic);
  return magic;
}
inline int id_port(const TcpUniqueId& id) {
  uint16_t port;
  std::memcpy(&port, id.bytes.data() + 16, sizeof port);
  return port;
}

// A plain blocking socket to 127.0.0.1:port, retried while the root starts listening.
inline int raw_connect(int port) {
  using namespace std::chrono_literals;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

}  // namespace ferry::testing
