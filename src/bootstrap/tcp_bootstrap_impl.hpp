// TcpBootstrap's internals, shared by tcp_bootstrap.cpp (formation, all_gather)
// and tcp_liveness.cpp (the liveness probe): the wire format and TcpBootstrap::Impl.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bootstrap/tcp_socket.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace tcp_bootstrap_detail {

using tcp::Clock;
using tcp::Deadline;
using tcp::FrameHeader;
using tcp::kFrameMagic;
using tcp::Socket;

// ---------------------------------------------------------------- wire format
// Frames are a tcp::FrameHeader (tcp_socket.hpp) and `length` payload bytes; these
// are the kinds and payloads of the bootstrap protocol.
enum FrameKind : uint32_t { kHello = 1, kReady = 2, kContribution = 3, kResult = 4, kAbort = 5, kPeers = 6 };

// Bumped whenever frames or payloads change meaning, so that ranks built from
// different ferry versions fail with a message naming both versions instead of
// misreading each other. Version 0 is what builds before the field existed sent
// (the field was reserved and zero).
constexpr uint32_t kProtocolVersion = 1;

struct HelloPayload {
  uint64_t id_magic;  // proves the member holds this group's unique id
  int32_t world_size;
  uint32_t version;  // kProtocolVersion of the member
};
static_assert(sizeof(HelloPayload) == 16);

// Peers payload (NOTE [Bootstrap liveness]): one entry per rank, by rank.
struct PeersEntry {
  uint32_t address_be;  // IPv4, network byte order; rank 0's own entry: 0 (the address it was reached at)
  uint16_t port;        // its liveness listener
  uint16_t reserved;
};
static_assert(sizeof(PeersEntry) == 8);

// Abort payload: uint32 "is a timeout" flag, then the root's error message.
constexpr size_t kMaxAbortBytes = 16384;

// Bytes of a complete hello frame: the most rank 0 reads from a connection before
// it knows which rank (if any) is behind it.
constexpr size_t kHelloFrameBytes = sizeof(FrameHeader) + sizeof(HelloPayload);

// What a frame of the wrong length usually means, appended to the error.
inline constexpr const char* kHelloLengthHint = "a hello is 16 bytes; is the peer another ferry build?";
inline constexpr const char* kSameBytesHint = "every rank must pass the same bytes_per_rank";

// ---------------------------------------------------------------- unique id layout
constexpr uint32_t kIdTag = 0x31444946u;   // "FID1"
constexpr uint32_t kIdEphemeralPort = 1u;  // the creating process holds the listening socket
struct IdLayout {
  uint32_t tag, flags;
  uint64_t magic;  // random, names the group
  uint16_t port, address_length;
  uint32_t reserved;
  char address[104];  // NUL-terminated
};
static_assert(sizeof(IdLayout) == sizeof(TcpUniqueId::bytes));

}  // namespace tcp_bootstrap_detail

// A private header (only tcp_bootstrap.cpp and tcp_liveness.cpp include it): Impl
// below and both files use the wire-format names unqualified.
using namespace tcp_bootstrap_detail;

struct TcpBootstrap::Impl {
  int rank = 0;
  int size = 1;
  TcpBootstrapOptions options;
  IdLayout id{};
  Socket listener;            // rank 0, until every member connected
  std::vector<Socket> peers;  // rank 0: indexed by rank; members: peers[0] is the root
  std::string failure;        // what broke this group; it refuses work afterwards
  std::vector<std::string> rejected;  // rank 0: intruders turned away while the group formed
  tcp::FrameIo io;            // framed I/O; its errors start with me()
  // NOTE [Bootstrap liveness]: this rank's listener, and every rank's (by rank;
  // port 0: unknown). Rank 0's entry on a member has address 0 until filled in.
  Socket liveness_listener;
  std::vector<tcp::Ipv4Endpoint> liveness;

  std::string me() const { return "TcpBootstrap: rank " + std::to_string(rank); }

  // Members wait longer than the root for the root's answers, so that when someone
  // is missing the root's verdict (which names the missing ranks) arrives first.
  std::chrono::milliseconds member_wait() const { return options.timeout + options.timeout / 2; }

  // Members: one frame from the root (its header returned), or the root's abort
  // message rethrown here.
  FrameHeader recv_from_root(uint32_t kind, void* payload, uint64_t length, const char* what) const {
    const Deadline deadline = Deadline::in(member_wait());
    FrameHeader h{};
    io.recv_bytes(peers[0].get(), &h, sizeof h, deadline, 0, what);
    if (h.magic == kFrameMagic && h.kind == kAbort && h.sender == 0) {
      if (h.length < sizeof(uint32_t) || h.length > kMaxAbortBytes) io.malformed("rank 0", "bad abort frame length");
      std::string text(h.length, '\0');
      io.recv_bytes(peers[0].get(), text.data(), text.size(), deadline, 0, "the abort message");
      uint32_t is_timeout = 0;
      std::memcpy(&is_timeout, text.data(), sizeof is_timeout);
      if (is_timeout) FERRY_THROW(TimeoutError, me() << ": root reported: " << text.substr(sizeof is_timeout));
      FERRY_THROW(BootstrapError, me() << ": root reported: " << text.substr(sizeof is_timeout));
    }
    if (h.magic == kFrameMagic && h.sender != 0)
      io.malformed("rank 0", "sender field says " + std::to_string(h.sender));
    io.check_header(h, "rank 0", kind, length, kind == kResult ? kSameBytesHint : nullptr);
    io.recv_bytes(peers[0].get(), payload, length, deadline, 0, what);
    return h;
  }

  // ---------------------------------------------------------------- setup
  void accept_members();
  void connect_to_root();
  PeerLiveness probe(std::chrono::milliseconds budget);
  void gather_at_root(const void* send, uint8_t* recv, size_t bytes);

  // Runs one operation; after any failure the group is unusable, and the root
  // tells the members why so that nobody waits for a timeout to learn it.
  template <typename Fn>
  void guarded(Fn&& fn) {
    if (!failure.empty()) FERRY_THROW(BootstrapError, me() << " is unusable after an earlier failure: " << failure);
    try {
      fn();
    } catch (const std::exception& e) {
      failure = e.what();
      for (size_t r = 1; rank == 0 && r < peers.size(); ++r)
        if (peers[r].valid()) send_abort(peers[r].get(), static_cast<int>(r), e);
      throw;
    }
  }

  // Best effort: a peer that cannot take it learns of the failure by EOF instead.
  void send_abort(int fd, int peer, const std::exception& error) const noexcept {
    const uint32_t is_timeout = dynamic_cast<const TimeoutError*>(&error) != nullptr;
    try {
      std::string payload(reinterpret_cast<const char*>(&is_timeout), sizeof is_timeout);
      payload += std::string(error.what()).substr(0, kMaxAbortBytes - sizeof is_timeout);
      io.send_frame(fd, kAbort, payload.data(), payload.size(), Deadline::in(std::chrono::milliseconds(100)), peer,
                    "the abort message");
    } catch (...) {
    }
  }

  // A connection to rank 0 that has not finished its hello yet.
  struct PendingMember {
    Socket sock;
    std::string from;
    FrameHeader header{};
    HelloPayload hello{};
    size_t got = 0;
  };
  bool admit_member(PendingMember& p);
};

}  // namespace ferry
