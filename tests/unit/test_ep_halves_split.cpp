// The SM split between an EpBuffer's overlapped halves (ep::halves_split), on the CPU: the built-in rule inside a
// node and across nodes (NOTE [EP across nodes: halves' split]), the clamps, and the two knobs over it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ep/halves_split.hpp"

namespace {

using ferry::ep::halves_split;
using ferry::ep::HalvesShape;
using ferry::ep::HalvesSplit;

HalvesShape shape(int num_sms, int world_size) { return {num_sms, world_size, false, false, false, false, false}; }

void expect_split(const HalvesShape& s, int dispatch_recv, int combine_recv) {
  const HalvesSplit split = halves_split(s);
  EXPECT_EQ(split.dispatch_recv_blocks, dispatch_recv) << s.num_sms << " SMs, " << s.world_size << " ranks";
  EXPECT_EQ(split.combine_recv_blocks, combine_recv) << s.num_sms << " SMs, " << s.world_size << " ranks";
}

class HalvesSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FERRY_EP_DISPATCH_RECV_BLOCKS");
    unsetenv("FERRY_EP_COMBINE_RECV_BLOCKS");
  }
  void TearDown() override { SetUp(); }
};

TEST_F(HalvesSplitTest, InsideANode) {
  expect_split(shape(24, 2), 16, 6);  // expanded high throughput on 2 ranks: combine receive 1/4
  expect_split(shape(24, 8), 16, 8);  // on more ranks 1/3
  HalvesShape rank_rows = shape(24, 8);
  rank_rows.rank_rows = true;
  expect_split(rank_rows, 16, 12);
  HalvesShape low_latency = shape(132, 2);
  low_latency.low_latency = true;
  expect_split(low_latency, 88, 66);
}

TEST_F(HalvesSplitTest, AcrossNodesByWhereTheNetworkWrites) {
  HalvesShape s = shape(24, 2);
  s.spans_nodes = true;
  expect_split(s, 12, 12);  // landings in host memory (tcp, UCX shared memory): half each
  s.network_writes_device_memory = true;
  expect_split(s, 16, 6);  // GPU memory (cuda_ipc, GPUDirect RDMA): as inside a node
  s.world_size = 8;
  expect_split(s, 16, 8);
  s.hierarchical = true;
  expect_split(s, 12, 12);  // the hierarchical path: half each
}

TEST_F(HalvesSplitTest, ShapeFromTheConfig) {
  ferry::EpConfig config;
  config.num_sms = 24;
  config.mode = ferry::EpMode::kLowLatency;
  config.layout = ferry::EpLayout::kRankRows;
  const HalvesShape s = ferry::ep::halves_shape(config, 4);
  EXPECT_EQ(s.num_sms, 24);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_TRUE(s.low_latency);
  EXPECT_TRUE(s.rank_rows);
  EXPECT_FALSE(s.spans_nodes || s.hierarchical || s.network_writes_device_memory);
  config.mode = ferry::EpMode::kHighThroughput;
  config.layout = ferry::EpLayout::kExpanded;
  expect_split(ferry::ep::halves_shape(config, 2), 16, 6);
}

TEST_F(HalvesSplitTest, EveryHalfKeepsABlock) {
  expect_split(shape(1, 2), 1, 1);
  expect_split(shape(2, 2), 1, 1);
  expect_split(shape(3, 2), 2, 1);  // 3 / 4 = 0 receive blocks would starve the combine
  HalvesShape s = shape(3, 2);
  s.spans_nodes = true;
  expect_split(s, 1, 1);
}

TEST_F(HalvesSplitTest, KnobsOverTheRuleWithinTheSms) {
  setenv("FERRY_EP_DISPATCH_RECV_BLOCKS", "5", 1);
  setenv("FERRY_EP_COMBINE_RECV_BLOCKS", "100", 1);
  expect_split(shape(24, 2), 5, 23);
  HalvesShape s = shape(24, 2);
  s.spans_nodes = true;
  expect_split(s, 5, 23);
}

}  // namespace
