// Topology: which ranks of a group share a node (NVLink reaches them) and which
// sit in other nodes (the inter-node path reaches them).
#pragma once

#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"

namespace ferry {

struct Topology {
  int rank = 0;        // global rank
  int size = 1;        // global size
  int node = 0;        // index of this rank's node
  int num_nodes = 1;
  int local_rank = 0;  // index inside the node
  int local_size = 1;  // ranks in this node
  int ranks_per_node = 1;  // ranks in every node when all nodes have as many, else 0
  std::vector<int> node_of_rank;        // node index of every global rank
  std::vector<int> local_rank_of_rank;  // local index of every global rank
  std::vector<int> ranks_in_node;       // global ranks of this node, by local rank
  // Index among the ranks of this machine (same hostname), in rank order: which
  // GPU a rank takes (NOTE [Device of a rank], communicator.cpp). Equals
  // local_rank unless virtual nodes (FERRY_RANKS_PER_NODE) split a machine.
  int host_rank = 0;
  int host_size = 1;  // ranks on this machine (local_size unless virtual nodes split it)
  bool same_node(int peer) const { return node_of_rank[peer] == node; }
};

// Groups ranks into nodes: by hostname, or consecutive blocks of
// FERRY_RANKS_PER_NODE (virtual nodes) when that variable is set.
Topology discover_topology(Bootstrap& bootstrap);

// The Topology of `rank` given every rank's node index (numbered 0..nodes-1):
// local ranks in rank order, node sizes. discover_topology's last step, also
// for tests that describe a layout of nodes without a bootstrap.
Topology topology_from_nodes(std::vector<int> node_of_rank, int rank);

// Each rank's index among the ranks with its host name, in rank order.
std::vector<int> host_ranks(const std::vector<std::string>& host_of_rank);

}  // namespace ferry
