// Socket-level building blocks of TcpBootstrap: owned file descriptors, deadlines,
// listening and connecting (with retry), and framed, deadline-bounded I/O on
// nonblocking sockets. Nothing here knows the bootstrap protocol (frame kinds,
// hello, abort); that lives in tcp_bootstrap.cpp.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ferry::tcp {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- frame header
// Fields are in host byte order: all ranks of one job share an architecture.
constexpr uint32_t kFrameMagic = 0x59525246u;  // "FRRY"

struct FrameHeader {
  uint32_t magic, kind;
  int32_t sender;
  uint32_t reserved;
  uint64_t length;  // payload bytes that follow
};
static_assert(sizeof(FrameHeader) == 24);

// ---------------------------------------------------------------- small helpers
std::string errno_text(int err);

struct Deadline {
  Clock::time_point at;
  long long budget_ms;
  static Deadline in(std::chrono::milliseconds budget) { return {Clock::now() + budget, budget.count()}; }
  int poll_ms() const;
  bool passed() const { return Clock::now() >= at; }
};

class Socket {  // owns one file descriptor
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept { return reset(other.release()), *this; }
  ~Socket() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "address:port" of the remote (or local) end of a connected socket.
std::string endpoint_name(int fd, bool remote = true);

// The port a bound socket got.
int bound_port(int fd);

// A nonblocking listening socket; errors throw BootstrapError.
Socket listen_on(const std::string& address, int port);

// One connection from the accept queue of a nonblocking listener, made nonblocking
// with TCP_NODELAY; an invalid Socket when the queue is empty (or accept failed).
Socket accept_nonblocking(int listen_fd);

// True when the peer closed (or reset) the connection before sending anything.
bool closed_before_sending(int fd);

// An IPv4 address (network byte order) and a port (host byte order).
struct Ipv4Endpoint {
  uint32_t address_be = 0;
  uint16_t port = 0;
};
// The remote (or local) end of a connected socket; address 0 when unknown.
Ipv4Endpoint ipv4_endpoint(int fd, bool remote = true);
// A nonblocking listener on `address_be` (IPv4, network order), port chosen by the
// kernel; an invalid Socket when that fails (callers treat it as optional).
Socket listen_ephemeral(uint32_t address_be);

// Liveness (NOTE [Bootstrap liveness], tcp_bootstrap.cpp). True when the peer of a
// connected socket hung up (closed or reset it), without reading from it.
bool hung_up(int fd);
// Accepts and closes every connection waiting on a nonblocking listener.
void drain_accept_queue(int listen_fd);
enum class ProbeResult { kAlive, kRefused, kSilent };
// Nonblocking connects to every target at once, each closed as soon as it is
// decided: completed -> kAlive (the kernel accepts for a listening process),
// refused -> kRefused (nothing listens there), anything else, or still pending at
// the deadline -> kSilent. Never throws; returns within the deadline.
std::vector<ProbeResult> probe_listeners(const std::vector<Ipv4Endpoint>& targets, const Deadline& deadline);

// Listening sockets of ids created with port 0, until rank 0 of that id claims them.
void park_listener(uint64_t key, Socket sock);
Socket claim_listener(uint64_t key);  // invalid when none is parked under `key`

// ---------------------------------------------------------------- framed I/O
// Blocking-style I/O on nonblocking sockets: every wait is a poll() against a
// deadline, so a missing or broken peer becomes a TimeoutError or BootstrapError
// naming it, never a hang. Errors start with `who` ("TcpBootstrap: rank N").
struct FrameIo {
  std::string who;
  int32_t sender = 0;            // written into every header sent
  uint64_t max_frame_bytes = 0;  // longest payload check_header accepts

  [[noreturn]] void malformed(const std::string& from, const std::string& why) const;
  // Rejects (BootstrapError naming the field and its value) a header whose magic or
  // kind is wrong, or whose length is over max_frame_bytes or other than `length`;
  // `hint`, when given, says what a wrong length usually means.
  void check_header(const FrameHeader& h, const std::string& from, uint32_t kind, uint64_t length,
                    const char* hint = nullptr) const;

  // One poll(); > 0 when some fd is ready, <= 0 on timeout or EINTR.
  int poll_once(std::vector<pollfd>& fds, const Deadline& deadline) const;
  void wait_ready(int fd, short events, const Deadline& deadline, const std::string& on_timeout) const;

  // Connects to `peer` (e.g. "rank 0") at address:port, retrying refused
  // connections with backoff until the deadline.
  Socket connect_with_retry(const std::string& address, int port, const Deadline& deadline,
                            const std::string& peer) const;

  void send_bytes(int fd, const void* data, size_t n, const Deadline& deadline, int peer, const char* what) const;
  // `reserved`: the header field of that name (0 unless a protocol NOTE gives it a meaning).
  void send_frame(int fd, uint32_t kind, const void* payload, size_t n, const Deadline& deadline, int peer,
                  const char* what, uint32_t reserved = 0) const;

  // One nonblocking recv: the bytes read, 0 when nothing is there yet; EOF and errors throw.
  size_t recv_some(int fd, void* at, size_t want, const std::string& from, bool mid_frame) const;
  void recv_bytes(int fd, void* data, size_t n, const Deadline& deadline, int peer, const char* what) const;

  // Reads what is available of one frame into `header` then `payload` (nonblocking).
  // Returns true when the frame is complete; `on_header` validates the header first,
  // so a bogus length is rejected before anything is read into `payload`.
  template <typename OnHeader>
  bool pump_frame(int fd, FrameHeader& header, size_t& got, uint8_t* payload, size_t length, const std::string& from,
                  OnHeader on_header) const {
    const size_t total = sizeof(FrameHeader) + length;
    while (got < total) {
      uint8_t* at = got < sizeof header ? reinterpret_cast<uint8_t*>(&header) + got : payload + (got - sizeof header);
      size_t want = got < sizeof header ? sizeof header - got : total - got;
      size_t n = recv_some(fd, at, want, from, got > 0);
      if (n == 0) return false;
      got += n;
      if (got == sizeof header) on_header();
    }
    return true;
  }
};

}  // namespace ferry::tcp
