// Which GPU index a rank takes (NOTE [Device of a rank], communicator.cpp): its
// place among the ranks of its machine, so virtual nodes spread over the GPUs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/topology.hpp"

namespace {

TEST(TopologyHosts, IndexAmongTheRanksOfEachMachine) {
  EXPECT_EQ(ferry::host_ranks({"a", "a", "a", "a"}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ferry::host_ranks({"a", "b", "a", "b"}), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(ferry::host_ranks({"b", "b", "a"}), (std::vector<int>{0, 1, 0}));
  EXPECT_TRUE(ferry::host_ranks({}).empty());
}

TEST(TopologyHosts, NodesWithoutHostNamesUseTheLocalRank) {
  // 2 nodes of 2 (a layout without host names): host_rank is the index in the node.
  for (int r = 0; r < 4; ++r) {
    const ferry::Topology t = ferry::topology_from_nodes({0, 0, 1, 1}, r);
    EXPECT_EQ(t.host_rank, t.local_rank) << r;
    EXPECT_EQ(t.host_size, t.local_size) << r;
  }
}

}  // namespace
