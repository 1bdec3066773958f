// Topology: which ranks of a group share a node (NVLink reaches them) and which
// sit in other nodes (the inter-node path reaches them).
#pragma once

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
  std::vector<int> node_of_rank;        // node index of every global rank
  std::vector<int> local_rank_of_rank;  // local index of every global rank
  std::vector<int> ranks_in_node;       // global ranks of this node, by local rank
  bool same_node(int peer) const { return node_of_rank[peer] == node; }
};

// Groups ranks into nodes: by hostname, or consecutive blocks of
// FERRY_RANKS_PER_NODE (virtual nodes) when that variable is set.
Topology discover_topology(Bootstrap& bootstrap);

}  // namespace ferry
