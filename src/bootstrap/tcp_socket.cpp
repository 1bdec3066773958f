// Socket-level code of TcpBootstrap (see tcp_socket.hpp).
#include "bootstrap/tcp_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "ferry/error.hpp"

namespace ferry::tcp {
namespace {

void make_nonblocking_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // frames are small and latency-bound
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

sockaddr_in resolve_ipv4(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr)
    FERRY_THROW(BootstrapError, "TcpBootstrap: cannot resolve address '" << address << "': " << ::gai_strerror(rc));
  sockaddr_in addr;
  std::memcpy(&addr, found->ai_addr, sizeof addr);
  ::freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

sockaddr_in ipv4_sockaddr(uint32_t address_be, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = address_be;
  addr.sin_port = htons(port);
  return addr;
}

// The remote (or local) address of `fd`; false when the kernel cannot tell.
bool socket_name(int fd, bool remote, sockaddr_in& addr) {
  socklen_t len = sizeof addr;
  return (remote ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                 : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)) == 0;
}

// A connect to a local port nobody listens on can connect the socket to itself
// (TCP simultaneous open: the kernel picked that port as the local one); that is
// no peer.
bool connected_to_itself(int fd) {
  const Ipv4Endpoint local = ipv4_endpoint(fd, false), remote = ipv4_endpoint(fd, true);
  return local.address_be == remote.address_be && local.port == remote.port;
}

struct ListenRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, int> fds;  // id magic -> listening fd
};
ListenRegistry& listen_registry() {
  static ListenRegistry registry;
  return registry;
}

}  // namespace

// ---------------------------------------------------------------- small helpers
std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

int Deadline::poll_ms() const {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(at - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

void Socket::reset(int fd) {
  if (int old = std::exchange(fd_, fd); old >= 0) ::close(old);
}

std::string endpoint_name(int fd, bool remote) {
  sockaddr_in addr{};
  if (!socket_name(fd, remote, addr)) return "unknown";
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

int bound_port(int fd) { return ipv4_endpoint(fd, false).port; }

Socket listen_on(const std::string& address, int port) {
  sockaddr_in addr = resolve_ipv4(address, port);
  Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) FERRY_THROW(BootstrapError, "TcpBootstrap: socket() failed: " << errno_text(errno));
  int one = 1;
  ::setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // rebinding after TIME_WAIT
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    FERRY_THROW(BootstrapError, "TcpBootstrap: cannot bind " << address << ":" << port << ": " << errno_text(err));
  }
  if (::listen(sock.get(), SOMAXCONN) != 0)
    FERRY_THROW(BootstrapError, "TcpBootstrap: listen() failed: " << errno_text(errno));
  ::fcntl(sock.get(), F_SETFL, ::fcntl(sock.get(), F_GETFL, 0) | O_NONBLOCK);
  return sock;
}

Socket accept_nonblocking(int listen_fd) {
  Socket sock(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (sock.valid()) make_nonblocking_nodelay(sock.get());
  return sock;
}

bool closed_before_sending(int fd) {
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

Ipv4Endpoint ipv4_endpoint(int fd, bool remote) {
  sockaddr_in addr{};
  if (!socket_name(fd, remote, addr) || addr.sin_family != AF_INET) return {};
  return {addr.sin_addr.s_addr, ntohs(addr.sin_port)};
}

Socket listen_ephemeral(uint32_t address_be) {
  Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return sock;
  const sockaddr_in addr = ipv4_sockaddr(address_be, 0);
  if (::bind(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(sock.get(), SOMAXCONN) != 0)
    sock.reset();
  return sock;
}

bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, 0);
  } while (rc < 0 && errno == EINTR);
  return rc > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void drain_accept_queue(int listen_fd) {
  for (int fd; (fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) ::close(fd);
}

std::vector<ProbeResult> probe_listeners(const std::vector<Ipv4Endpoint>& targets, const Deadline& deadline) {
  std::vector<ProbeResult> result(targets.size(), ProbeResult::kSilent);
  std::vector<Socket> socks(targets.size());
  std::vector<size_t> pending;
  // Connected: alive, unless the socket connected to itself (nothing listens there).
  auto connected = [](int fd) { return connected_to_itself(fd) ? ProbeResult::kRefused : ProbeResult::kAlive; };
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].port == 0) continue;
    Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock.valid()) continue;
    const sockaddr_in addr = ipv4_sockaddr(targets[i].address_be, targets[i].port);
    if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
      result[i] = connected(sock.get());
    } else if (errno == EINPROGRESS || errno == EINTR) {
      socks[i] = std::move(sock);
      pending.push_back(i);
    } else if (errno == ECONNREFUSED) {
      result[i] = ProbeResult::kRefused;
    }
  }
  while (!pending.empty()) {
    std::vector<pollfd> fds;
    for (size_t i : pending) fds.push_back({socks[i].get(), POLLOUT, 0});
    const int rc = ::poll(fds.data(), fds.size(), deadline.poll_ms());
    if (rc < 0 && errno != EINTR) break;
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      const size_t i = pending[k];
      if (rc <= 0 || fds[k].revents == 0) {
        still.push_back(i);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(socks[i].get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      result[i] = err == 0 ? connected(socks[i].get()) : err == ECONNREFUSED ? ProbeResult::kRefused
                                                                              : ProbeResult::kSilent;
      socks[i].reset();
    }
    pending = std::move(still);
    if (deadline.passed()) break;
  }
  return result;  // still pending: kSilent (closed with `socks`)
}

void park_listener(uint64_t key, Socket sock) {
  auto& registry = listen_registry();
  std::lock_guard lock(registry.mutex);
  registry.fds[key] = sock.release();
}

Socket claim_listener(uint64_t key) {
  auto& registry = listen_registry();
  std::lock_guard lock(registry.mutex);
  Socket sock;
  if (auto it = registry.fds.find(key); it != registry.fds.end()) {
    sock.reset(it->second);
    registry.fds.erase(it);
  }
  return sock;
}

// ---------------------------------------------------------------- framed I/O
void FrameIo::malformed(const std::string& from, const std::string& why) const {
  FERRY_THROW(BootstrapError, who << ": malformed frame from " << from << ": " << why);
}

void FrameIo::check_header(const FrameHeader& h, const std::string& from, uint32_t kind, uint64_t length,
                           const char* hint) const {
  std::ostringstream why;
  if (h.magic != kFrameMagic)
    why << "bad magic 0x" << std::hex << h.magic;
  else if (h.kind != kind)
    why << "kind " << h.kind << ", expected " << kind;
  else if (h.length > std::max<uint64_t>(max_frame_bytes, length))  // protocol frames fit even a tiny cap
    why << "length " << h.length << " exceeds max_frame_bytes " << max_frame_bytes;
  else if (h.length != length)
    why << "length " << h.length << ", expected " << length << (hint ? std::string(" (") + hint + ")" : "");
  else
    return;
  malformed(from, why.str());
}

int FrameIo::poll_once(std::vector<pollfd>& fds, const Deadline& deadline) const {
  int rc = ::poll(fds.data(), fds.size(), deadline.poll_ms());
  if (rc < 0 && errno != EINTR) FERRY_THROW(BootstrapError, who << ": poll() failed: " << errno_text(errno));
  return rc;
}

void FrameIo::wait_ready(int fd, short events, const Deadline& deadline, const std::string& on_timeout) const {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) FERRY_THROW(BootstrapError, who << ": poll() failed: " << errno_text(errno));
    if (rc == 0 && deadline.passed())
      FERRY_THROW(TimeoutError, who << " timed out after " << deadline.budget_ms << " ms " << on_timeout);
  }
}

Socket FrameIo::connect_with_retry(const std::string& address, int port, const Deadline& deadline,
                                   const std::string& peer) const {
  const sockaddr_in target = resolve_ipv4(address, port);
  std::chrono::milliseconds backoff(10);
  std::string last_error = "none";
  for (;;) {
    Socket sock(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock.valid()) FERRY_THROW(BootstrapError, who << ": socket() failed: " << errno_text(errno));
    int err = ::connect(sock.get(), reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      wait_ready(sock.get(), POLLOUT, deadline,
                 "connecting to " + peer + " at " + address + ":" + std::to_string(port));
      socklen_t len = sizeof err;
      ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    // Retrying connects to a local port nobody listens on can connect a socket to itself.
    if (err == 0 && connected_to_itself(sock.get())) err = ECONNREFUSED;
    if (err == 0) {
      make_nonblocking_nodelay(sock.get());
      return sock;
    }
    last_error = errno_text(err);
    if (deadline.passed())
      FERRY_THROW(TimeoutError, who << " timed out after " << deadline.budget_ms << " ms connecting to " << peer
                                    << " at " << address << ":" << port << " (last error: " << last_error << ")");
    std::this_thread::sleep_for(std::min(backoff, std::chrono::milliseconds(deadline.poll_ms())));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

void FrameIo::send_bytes(int fd, const void* data, size_t n, const Deadline& deadline, int peer,
                         const char* what) const {
  auto* at = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t sent = ::send(fd, at, n, MSG_NOSIGNAL);  // a dead peer must not raise SIGPIPE
    if (sent > 0) {
      at += sent;
      n -= static_cast<size_t>(sent);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_ready(fd, POLLOUT, deadline,
                 std::string("sending ") + what + " to rank " + std::to_string(peer) + " (it is not reading)");
    } else if (errno != EINTR) {
      int err = errno;
      FERRY_THROW(BootstrapError, who << " lost the connection to rank " << peer << " while sending " << what << ": "
                                      << errno_text(err));
    }
  }
}

void FrameIo::send_frame(int fd, uint32_t kind, const void* payload, size_t n, const Deadline& deadline, int peer,
                         const char* what, uint32_t reserved) const {
  FrameHeader header{kFrameMagic, kind, sender, reserved, n};
  send_bytes(fd, &header, sizeof header, deadline, peer, what);
  if (n > 0) send_bytes(fd, payload, n, deadline, peer, what);
}

size_t FrameIo::recv_some(int fd, void* at, size_t want, const std::string& from, bool mid_frame) const {
  for (;;) {
    ssize_t n = ::recv(fd, at, want, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0)
      FERRY_THROW(BootstrapError,
                  who << ": " << from << " closed the connection" << (mid_frame ? " in the middle of a frame" : ""));
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) {
      int err = errno;
      FERRY_THROW(BootstrapError, who << ": connection to " << from << " failed: " << errno_text(err));
    }
  }
}

void FrameIo::recv_bytes(int fd, void* data, size_t n, const Deadline& deadline, int peer, const char* what) const {
  const std::string from = "rank " + std::to_string(peer);
  for (auto* at = static_cast<uint8_t*>(data); n > 0;) {
    size_t got = recv_some(fd, at, n, from, false);
    if (got == 0) wait_ready(fd, POLLIN, deadline, "waiting for " + from + " to send " + what);
    at += got;
    n -= got;
  }
}

}  // namespace ferry::tcp
