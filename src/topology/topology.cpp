// Which ranks share a node: same hostname, or consecutive groups of
// FERRY_RANKS_PER_NODE ranks ("virtual nodes", used to exercise the inter-node
// path on one machine).
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/knobs.hpp"
#include "ferry/error.hpp"
#include "ferry/topology.hpp"

namespace ferry {

namespace {
constexpr size_t kHostNameBytes = 256;

int ranks_per_node_from_env(int world_size) {
  const std::optional<int64_t> value = knobs::kRanksPerNode.read();  // a positive int
  if (!value) return 0;
  FERRY_CHECK(world_size % *value == 0, InvalidArgument,
              "FERRY_RANKS_PER_NODE=" << *value << " does not divide the world size " << world_size);
  return static_cast<int>(*value);
}
}  // namespace

Topology discover_topology(Bootstrap& bootstrap) {
  Topology topo;
  topo.rank = bootstrap.rank();
  topo.size = bootstrap.size();
  topo.node_of_rank.assign(topo.size, 0);

  std::array<char, kHostNameBytes> host{};
  gethostname(host.data(), host.size() - 1);
  std::vector<char> hosts(kHostNameBytes * topo.size);
  bootstrap.all_gather(host.data(), hosts.data(), kHostNameBytes);
  // Every rank must agree on FERRY_RANKS_PER_NODE: gather it too.
  const int per_node = ranks_per_node_from_env(topo.size);
  std::vector<int> all_per_node = bootstrap.all_gather_value(per_node);
  for (int r = 0; r < topo.size; ++r) {
    FERRY_CHECK(all_per_node[r] == per_node, InvalidArgument,
                "FERRY_RANKS_PER_NODE differs between ranks: rank " << topo.rank << " has " << per_node
                                                                   << ", rank " << r << " has "
                                                                   << all_per_node[r]);
  }

  std::vector<std::string> names(topo.size);
  for (int r = 0; r < topo.size; ++r)
    names[r].assign(&hosts[kHostNameBytes * r], strnlen(&hosts[kHostNameBytes * r], kHostNameBytes));
  if (per_node > 0) {
    for (int r = 0; r < topo.size; ++r) topo.node_of_rank[r] = r / per_node;
  } else {
    std::map<std::string, int> node_by_host;  // nodes numbered by first appearance
    for (int r = 0; r < topo.size; ++r) {
      auto [it, inserted] = node_by_host.emplace(names[r], static_cast<int>(node_by_host.size()));
      topo.node_of_rank[r] = it->second;
    }
  }
  Topology result = topology_from_nodes(std::move(topo.node_of_rank), topo.rank);
  result.host_rank = host_ranks(names)[topo.rank];
  result.host_size = static_cast<int>(std::count(names.begin(), names.end(), names[topo.rank]));
  return result;
}

std::vector<int> host_ranks(const std::vector<std::string>& host_of_rank) {
  std::map<std::string, int> seen;
  std::vector<int> index(host_of_rank.size());
  for (size_t r = 0; r < host_of_rank.size(); ++r) index[r] = seen[host_of_rank[r]]++;
  return index;
}

Topology topology_from_nodes(std::vector<int> node_of_rank, int rank) {
  Topology topo;
  topo.rank = rank;
  topo.size = static_cast<int>(node_of_rank.size());
  topo.node_of_rank = std::move(node_of_rank);
  topo.local_rank_of_rank.assign(topo.size, 0);
  std::map<int, int> count_in_node;
  for (int r = 0; r < topo.size; ++r) topo.local_rank_of_rank[r] = count_in_node[topo.node_of_rank[r]]++;
  topo.num_nodes = static_cast<int>(count_in_node.size());
  topo.node = topo.node_of_rank[topo.rank];
  topo.local_rank = topo.local_rank_of_rank[topo.rank];
  topo.host_rank = topo.local_rank;  // one machine per node, unless discover_topology knows the hosts
  topo.local_size = count_in_node[topo.node];
  topo.host_size = topo.local_size;
  topo.ranks_per_node = count_in_node.begin()->second;
  for (const auto& [node, count] : count_in_node)
    if (count != topo.ranks_per_node) topo.ranks_per_node = 0;
  for (int r = 0; r < topo.size; ++r)
    if (topo.node_of_rank[r] == topo.node) topo.ranks_in_node.push_back(r);
  return topo;
}

}  // namespace ferry
