// TcpBootstrap: a star around rank 0 over plain TCP sockets. Members connect to the
// root and introduce themselves with a hello frame; all_gather sends every
// contribution to the root, which sends the assembled result back to each member.
// Every wait is a poll() against a deadline, so a missing or broken peer becomes a
// TimeoutError or BootstrapError naming it, never a hang. When the root fails it
// tells the members why (an abort frame), so they report the same cause.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "bootstrap/tcp_bootstrap_impl.hpp"
#include "bootstrap/tcp_socket.hpp"
#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

IdLayout decode_id(const TcpUniqueId& id) {
  IdLayout layout;
  std::memcpy(&layout, id.bytes.data(), sizeof layout);
  FERRY_ARG_CHECK(layout.tag == kIdTag, "TcpUniqueId: not an id made by TcpBootstrap::create_unique_id");
  FERRY_ARG_CHECK(layout.address_length > 0 && layout.address_length < sizeof layout.address &&
                      layout.address[layout.address_length] == '\0' &&
                      std::strlen(layout.address) == layout.address_length,
                  "TcpUniqueId: corrupt address field");
  FERRY_ARG_CHECK(layout.port != 0, "TcpUniqueId: port 0 in a finished id");
  return layout;
}

// ---------------------------------------------------------------- small helpers
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

uint64_t random_magic() {
  std::random_device device;
  uint64_t magic = 0;
  while (magic == 0) {
    magic = (uint64_t{device()} << 32) ^ device() ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
            (uint64_t(::getpid()) << 16);
  }
  return magic;
}

}  // namespace



// NOTE [TCP bootstrap frames]
// Rank 0 reads at most kHelloFrameBytes from a connection before admitting it, into
// fixed buffers: a length field is checked against the hello's exact size (and
// max_frame_bytes) before any payload byte is read, so no claim on the wire sizes
// an allocation. What it does with each kind of bad connection:
//   - connects and closes (or resets) without a byte: a port probe or health check;
//     ignored, the root keeps waiting.
//   - wrong magic, wrong kind, wrong length, rank out of [1, size), a different
//     protocol version, unique id or world size: BootstrapError naming the field,
//     its value and the peer; the peer and the ranks already in get an abort frame
//     with the same text. These fail the group instead of being dropped: the port
//     is a short-lived one handed out with the unique id, so what writes to it is
//     almost always a misconfigured rank (another build, another job's id), and
//     failing now with the reason beats a timeout that only names a missing rank.
//   - closes mid-frame: BootstrapError ("closed the connection in the middle of a
//     frame"), at once; one that stalls mid-frame is named in the TimeoutError.
//   - claims a rank that already joined: only the newcomer is turned away (abort
//     frame "duplicate rank N", logged on stderr); the group goes on, so a stray
//     replay cannot kill a healthy group. If the real rank was the newcomer, the
//     root's TimeoutError names the missing rank and lists the rejected claims.
// Tests: tests/unit/test_tcp_bootstrap_frames.cpp, tests/mp/test_bootstrap_fuzz.cpp.

// Reads what is available of a candidate's hello; true once it joined as a rank.
bool TcpBootstrap::Impl::admit_member(PendingMember& p) {
  // A connection that closes before sending anything is a port probe, not a rank.
  if (p.got == 0 && tcp::closed_before_sending(p.sock.get())) {
    p.sock.reset();
    return false;
  }
  auto check_hello_header = [&] {
    const FrameHeader& h = p.header;
    if (h.magic == kFrameMagic && h.kind == kHello) p.from += " (claims rank " + std::to_string(h.sender) + ")";
    io.check_header(h, p.from, kHello, sizeof(HelloPayload), kHelloLengthHint);
    if (h.sender < 1 || h.sender >= size)
      io.malformed(p.from, "rank " + std::to_string(h.sender) + " out of range [1, " + std::to_string(size) + ")");
  };
  if (!io.pump_frame(p.sock.get(), p.header, p.got, reinterpret_cast<uint8_t*>(&p.hello), sizeof p.hello, p.from,
                     check_hello_header))
    return false;
  const int member = p.header.sender;
  // Version first: a peer of another version may lay out the rest differently.
  if (p.hello.version != kProtocolVersion)
    FERRY_THROW(BootstrapError, me() << ": " << p.from << " speaks bootstrap protocol version " << p.hello.version
                                     << ", rank 0 speaks version " << kProtocolVersion
                                     << " (all ranks must use the same ferry build)");
  if (peers[static_cast<size_t>(member)].valid()) {
    // First come, first served: the rank that already joined keeps its place and the
    // group goes on; only the newcomer is turned away (it learns why from the abort
    // frame). If the newcomer was the real rank, the root's timeout names the
    // missing rank and lists the rejected claims, so nothing hangs or stays silent.
    const BootstrapError error(me() + ": duplicate rank " + std::to_string(member) + ": " + p.from +
                               " claims a rank that already connected; it was turned away");
    send_abort(p.sock.get(), member, error);
    std::fprintf(stderr, "[ferry] %s\n", error.what());
    rejected.push_back(error.what());
    p.sock.reset();
    return false;
  }
  if (p.hello.id_magic != id.magic)
    FERRY_THROW(BootstrapError, me() << ": " << p.from << " holds a different unique id: it belongs to another group");
  if (p.hello.world_size != size)
    FERRY_THROW(BootstrapError, me() << ": " << p.from << " was created with size " << p.hello.world_size
                                     << ", rank 0 with size " << size);
  // NOTE [Bootstrap liveness]: the member's listener port (0: none), at the
  // address this connection comes from.
  liveness[static_cast<size_t>(member)] = {tcp::ipv4_endpoint(p.sock.get()).address_be,
                                           static_cast<uint16_t>(p.header.reserved <= 0xFFFF ? p.header.reserved : 0)};
  peers[static_cast<size_t>(member)] = std::move(p.sock);
  return true;
}

void TcpBootstrap::Impl::accept_members() {
  const Deadline deadline = Deadline::in(options.timeout);
  peers.resize(static_cast<size_t>(size));
  liveness.assign(static_cast<size_t>(size), tcp::Ipv4Endpoint{});
  std::vector<PendingMember> pending;
  int connected = 0;
  while (connected < size - 1) {
    std::vector<pollfd> fds{{listener.get(), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.sock.get(), POLLIN, 0});
    int rc = io.poll_once(fds, deadline);
    if (rc <= 0) {
      if (!deadline.passed()) continue;
      std::vector<int> missing;
      for (int r = 1; r < size; ++r)
        if (!peers[static_cast<size_t>(r)].valid()) missing.push_back(r);
      std::string notes;
      for (const auto& r : rejected) notes += "; earlier: " + r;
      for (const auto& p : pending)  // connections stuck in the middle of a hello
        if (p.got > 0)
          notes += "; " + p.from + " sent " + std::to_string(p.got) + " of the " + std::to_string(kHelloFrameBytes) +
                   " bytes of a hello, then nothing";
      FERRY_THROW(TimeoutError, me() << " timed out after " << deadline.budget_ms << " ms waiting for "
                                     << rank_list(missing) << " to connect" << notes);
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 1].revents == 0) continue;
      try {
        if (admit_member(pending[i])) ++connected;
      } catch (const std::exception& e) {
        send_abort(pending[i].sock.get(), -1, e);  // tell the rejected peer why
        throw;
      }
    }
    std::erase_if(pending, [](const PendingMember& p) { return !p.sock.valid(); });
    if (fds[0].revents != 0) {
      // Drain the accept queue; EAGAIN ends it, other errors are retried on the next poll.
      for (Socket sock; (sock = tcp::accept_nonblocking(listener.get())).valid();) {
        std::string from = "peer " + tcp::endpoint_name(sock.get());
        pending.push_back(PendingMember{std::move(sock), std::move(from)});
      }
    }
  }
  // NOTE [Bootstrap liveness]: a listener of our own, on the address the members
  // reached us at; the table goes out only when every member advertised one.
  const tcp::Ipv4Endpoint reached = tcp::ipv4_endpoint(listener.get(), false);
  listener.reset();  // everyone is here: free the port
  bool table = std::all_of(liveness.begin() + 1, liveness.end(), [](const tcp::Ipv4Endpoint& e) { return e.port; });
  if (table) {
    liveness_listener = tcp::listen_ephemeral(reached.address_be);
    liveness[0] = {0, static_cast<uint16_t>(liveness_listener.valid() ? tcp::bound_port(liveness_listener.get()) : 0)};
    table = liveness[0].port != 0;
  }
  std::vector<PeersEntry> entries(static_cast<size_t>(size));
  for (size_t r = 0; r < entries.size(); ++r) entries[r] = {liveness[r].address_be, liveness[r].port, 0};
  const Deadline ready_deadline = Deadline::in(options.timeout);
  for (int r = 1; r < size; ++r) {
    const int fd = peers[static_cast<size_t>(r)].get();
    io.send_frame(fd, kReady, nullptr, 0, ready_deadline, r, "the group confirmation", table ? 1 : 0);
    if (table)
      io.send_frame(fd, kPeers, entries.data(), entries.size() * sizeof(PeersEntry), ready_deadline, r,
                    "the liveness table");
  }
}

// NOTE [Bootstrap liveness] is in tcp_liveness.cpp, next to probe().
void TcpBootstrap::Impl::connect_to_root() {
  peers.push_back(io.connect_with_retry(id.address, id.port, Deadline::in(options.timeout), "rank 0"));
  // NOTE [Bootstrap liveness]: a listener on the address we reach rank 0 from;
  // its port rides in the hello header's reserved field (0: none).
  liveness_listener = tcp::listen_ephemeral(tcp::ipv4_endpoint(peers[0].get(), false).address_be);
  const uint32_t advertised =
      liveness_listener.valid() ? static_cast<uint32_t>(tcp::bound_port(liveness_listener.get())) : 0;
  const HelloPayload hello{id.magic, size, kProtocolVersion};
  io.send_frame(peers[0].get(), kHello, &hello, sizeof hello, Deadline::in(options.timeout), 0, "the hello",
                advertised);
  const FrameHeader ready = recv_from_root(kReady, nullptr, 0, "the confirmation that all ranks connected");
  if (ready.reserved != 1) return;  // no table: liveness unknown but for rank 0's connection
  std::vector<PeersEntry> entries(static_cast<size_t>(size));
  recv_from_root(kPeers, entries.data(), entries.size() * sizeof(PeersEntry), "the liveness table");
  liveness.assign(static_cast<size_t>(size), tcp::Ipv4Endpoint{});
  for (size_t r = 0; r < entries.size(); ++r) liveness[r] = {entries[r].address_be, entries[r].port};
  liveness[0].address_be = tcp::ipv4_endpoint(peers[0].get()).address_be;  // where we reached rank 0
}


void TcpBootstrap::Impl::gather_at_root(const void* send, uint8_t* recv, size_t bytes) {
  if (bytes > 0) std::memmove(recv, send, bytes);  // memmove: `send` may be recv's own slot
  const Deadline deadline = Deadline::in(options.timeout);
  std::vector<FrameHeader> headers(static_cast<size_t>(size));
  std::vector<size_t> got(static_cast<size_t>(size), 0);
  std::vector<int> waiting;
  for (int r = 1; r < size; ++r) waiting.push_back(r);
  while (!waiting.empty()) {
    std::vector<pollfd> fds;
    for (int r : waiting) fds.push_back({peers[static_cast<size_t>(r)].get(), POLLIN, 0});
    int rc = io.poll_once(fds, deadline);
    if (rc <= 0) {
      if (deadline.passed())
        FERRY_THROW(TimeoutError, me() << " timed out after " << deadline.budget_ms << " ms in all_gather waiting for "
                                       << rank_list(waiting) << " to send their contribution");
      continue;
    }
    std::vector<int> still_waiting;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const int r = waiting[i];
      const auto slot = static_cast<size_t>(r);
      const std::string from = "rank " + std::to_string(r);
      bool done = fds[i].revents != 0 &&
                  io.pump_frame(peers[slot].get(), headers[slot], got[slot], recv + slot * bytes, bytes, from, [&] {
                    if (headers[slot].magic == kFrameMagic && headers[slot].sender != r)
                      io.malformed(from, "sender field says " + std::to_string(headers[slot].sender));
                    io.check_header(headers[slot], from, kContribution, bytes, kSameBytesHint);
                  });
      if (!done) still_waiting.push_back(r);
    }
    waiting = std::move(still_waiting);
  }
  const Deadline send_deadline = Deadline::in(options.timeout);
  for (int r = 1; r < size; ++r)
    io.send_frame(peers[static_cast<size_t>(r)].get(), kResult, recv, bytes * static_cast<size_t>(size), send_deadline,
                  r, "the all_gather result");
}

// ==================================================================== public API
TcpUniqueId TcpBootstrap::create_unique_id(const std::string& address, int port) {
  std::string host = address;
  if (host.empty()) host = knobs::kBootstrapAddr.value();
  FERRY_ARG_CHECK(port >= 0 && port <= 65535,
                  "TcpBootstrap::create_unique_id: port must be in [0, 65535], got " << port);
  IdLayout layout{};
  FERRY_ARG_CHECK(host.size() < sizeof layout.address, "TcpBootstrap::create_unique_id: address '"
                                                           << host << "' is longer than " << sizeof layout.address - 1
                                                           << " characters");
  layout.tag = kIdTag;
  layout.magic = random_magic();
  layout.address_length = static_cast<uint16_t>(host.size());
  std::memcpy(layout.address, host.data(), host.size());
  if (port == 0) {
    // Bind now so the port is known and stays ours until rank 0 of this id claims it.
    Socket sock = tcp::listen_on(host, 0);
    port = tcp::bound_port(sock.get());
    layout.flags |= kIdEphemeralPort;
    tcp::park_listener(layout.magic, std::move(sock));
  }
  layout.port = static_cast<uint16_t>(port);
  TcpUniqueId id;
  std::memcpy(id.bytes.data(), &layout, sizeof layout);
  return id;
}

std::string TcpBootstrap::id_to_string(const TcpUniqueId& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (uint8_t b : id.bytes) text += {kDigits[b >> 4], kDigits[b & 15]};
  return text;
}

TcpUniqueId TcpBootstrap::id_from_string(const std::string& text) {
  TcpUniqueId id;
  FERRY_ARG_CHECK(text.size() == id.bytes.size() * 2, "TcpBootstrap::id_from_string: expected "
                                                          << id.bytes.size() * 2 << " hex characters, got "
                                                          << text.size());
  auto nibble = [&](size_t pos) {
    char c = text[pos];
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    FERRY_THROW(InvalidArgument, "TcpBootstrap::id_from_string: invalid character '" << c << "' at position " << pos);
  };
  for (size_t i = 0; i < id.bytes.size(); ++i)
    id.bytes[i] = static_cast<uint8_t>(nibble(2 * i) << 4 | nibble(2 * i + 1));
  decode_id(id);  // the content must be an id, not just hex
  return id;
}

TcpBootstrap::TcpBootstrap(const TcpUniqueId& id, int rank, int size, TcpBootstrapOptions options)
    : impl_(std::make_unique<Impl>()), rank_(rank), size_(size) {
  FERRY_ARG_CHECK(size >= 1, "TcpBootstrap: size must be >= 1, got " << size);
  FERRY_ARG_CHECK(rank >= 0 && rank < size, "TcpBootstrap: rank must be in [0, " << size << "), got " << rank);
  FERRY_ARG_CHECK(options.timeout.count() > 0, "TcpBootstrap: timeout must be > 0 ms, got " << options.timeout.count());
  FERRY_ARG_CHECK(options.max_frame_bytes > 0, "TcpBootstrap: max_frame_bytes must be > 0");
  Impl& impl = *impl_;
  impl.rank = rank;
  impl.size = size;
  impl.options = options;
  impl.id = decode_id(id);
  impl.io = {impl.me(), rank, options.max_frame_bytes};
  if (rank == 0) impl.listener = tcp::claim_listener(impl.id.magic);
  if (size == 1) {
    impl.listener.reset();
    return;
  }
  impl.guarded([&] {
    if (rank == 0) {
      if (!impl.listener.valid()) {
        try {
          impl.listener = tcp::listen_on(impl.id.address, impl.id.port);
        } catch (const BootstrapError& e) {
          if (!(impl.id.flags & kIdEphemeralPort)) throw;
          FERRY_THROW(BootstrapError, e.what() << "; this id was created with port 0, so rank 0 must be built in "
                                                  "the process that created it (and only once)");
        }
      }
      impl.accept_members();
    } else {
      impl.connect_to_root();
    }
  });
}

TcpBootstrap::~TcpBootstrap() = default;  // Socket members close every fd

void TcpBootstrap::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  FERRY_ARG_CHECK(bytes_per_rank == 0 || (send != nullptr && recv != nullptr),
                  "TcpBootstrap::all_gather: null buffer with bytes_per_rank " << bytes_per_rank);
  const auto ranks = static_cast<size_t>(size_);
  FERRY_ARG_CHECK(bytes_per_rank <= impl_->options.max_frame_bytes / ranks,
                  "TcpBootstrap::all_gather: " << ranks << " x " << bytes_per_rank << " bytes exceeds max_frame_bytes "
                                               << impl_->options.max_frame_bytes);
  auto* out = static_cast<uint8_t*>(recv);
  if (size_ == 1) {
    if (bytes_per_rank > 0) std::memmove(out, send, bytes_per_rank);
    return;
  }
  impl_->guarded([&] {
    if (rank_ == 0) {
      impl_->gather_at_root(send, out, bytes_per_rank);
    } else {
      impl_->io.send_frame(impl_->peers[0].get(), kContribution, send, bytes_per_rank,
                           Deadline::in(impl_->options.timeout), 0, "the all_gather contribution");
      impl_->recv_from_root(kResult, out, bytes_per_rank * ranks, "the all_gather result");
    }
  });
}

PeerLiveness TcpBootstrap::probe_liveness(std::chrono::milliseconds budget) noexcept {
  if (size_ == 1) return {true, {}, {}};
  try {
    return impl_->probe(std::max(budget, std::chrono::milliseconds(1)));
  } catch (...) {  // allocation failure: cannot tell
    return {};
  }
}

void TcpBootstrap::barrier() {
  std::vector<uint8_t> sink(static_cast<size_t>(size_));
  uint8_t token = 1;
  all_gather(&token, sink.data(), 1);
}

}  // namespace ferry
