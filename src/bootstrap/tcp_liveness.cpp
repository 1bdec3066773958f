// TcpBootstrap's liveness probe (NOTE [Bootstrap liveness]); formation, which
// sets up the listeners, is in tcp_bootstrap.cpp.
#include "bootstrap/tcp_bootstrap_impl.hpp"

namespace ferry {

// NOTE [Bootstrap liveness]
// Which ranks are gone, asked on error paths (Communicator::check adds it to a
// device timeout's message): a survivor's wait can name a live peer that waits in
// turn on the dead rank (a ring, world >= 3), and the error must name the dead one.
//  - Every rank keeps a listening socket for the life of the bootstrap, bound to
//    the address it reaches rank 0 from (rank 0: the address its members reached
//    it at), port picked by the kernel. Nothing is ever read from it.
//  - Formation: a member puts its listener's port in the hello header's
//    `reserved` field; rank 0 takes the member's IPv4 address from that
//    connection. When every member advertised a port (and rank 0 has a listener
//    too), rank 0's ready frame carries reserved = 1 and a peers frame follows
//    (kind 6, size x PeersEntry; rank 0's own address is 0: "where you reached
//    rank 0"). The field was reserved and zero, and builds before this ignore it,
//    so groups still form across such builds (kProtocolVersion stays 1): a member
//    that advertised nothing, or raw peers in tests, get a plain ready frame.
//  - probe_liveness(budget), any time, on any rank, with no help from others:
//    a rank whose connection to this one hung up is gone (rank 0 holds every
//    member's connection, a member only rank 0's); so is a rank whose listener
//    refuses a connection (every other rank's listener at once, nonblocking
//    connects polled against the budget): the kernel closes the listener of a
//    process that exited, SIGKILL included. A connection that completes means the
//    process is there (the kernel completes it, the process does nothing); no
//    answer within the budget is "silent" (a host down, or overloaded). Nothing is
//    sent on the framed connections, so probing never disturbs a collective. Each
//    probe first accepts and closes what others' probes left in our queue.
//  - Limits: a process that forked children (without exec) which still hold the
//    listener looks alive while they live; a rank that destroyed its bootstrap
//    (finished normally) looks gone, which is what "left the group" means.
// Tests: tests/gpu/test_bootstrap_liveness.cpp (BootstrapLiveness.*: CPU, forked
// ranks) and tests/gpu/test_killed_peer.cpp (KilledPeer.*: the GPU collectives' messages).
PeerLiveness TcpBootstrap::Impl::probe(std::chrono::milliseconds budget) {
  PeerLiveness out;
  if (liveness_listener.valid()) tcp::drain_accept_queue(liveness_listener.get());  // others' earlier probes
  std::vector<char> gone(static_cast<size_t>(size), 0);
  // The connections we hold: rank 0 holds every member's, a member rank 0's.
  for (size_t r = 0; r < peers.size(); ++r) {
    const int peer = rank == 0 ? static_cast<int>(r) : 0;
    if (peer != rank && peers[r].valid() && tcp::hung_up(peers[r].get())) gone[static_cast<size_t>(peer)] = 1;
  }
  // Every other rank's listener.
  std::vector<tcp::Ipv4Endpoint> targets;
  std::vector<int> target_rank;
  for (int r = 0; r < size; ++r) {
    if (r == rank || gone[static_cast<size_t>(r)] || static_cast<size_t>(r) >= liveness.size() ||
        liveness[static_cast<size_t>(r)].port == 0)
      continue;
    targets.push_back(liveness[static_cast<size_t>(r)]);
    target_rank.push_back(r);
  }
  const std::vector<tcp::ProbeResult> results = tcp::probe_listeners(targets, Deadline::in(budget));
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i] == tcp::ProbeResult::kRefused) gone[static_cast<size_t>(target_rank[i])] = 1;
    if (results[i] == tcp::ProbeResult::kSilent) out.silent.push_back(target_rank[i]);
  }
  for (int r = 0; r < size; ++r)
    if (gone[static_cast<size_t>(r)]) out.gone.push_back(r);
  // Rank 0 sees every member's connection; with the table, everyone sees every listener.
  out.known = rank == 0 || liveness.size() == static_cast<size_t>(size);
  return out;
}

}  // namespace ferry
