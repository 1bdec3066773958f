// The rank-rows dispatch's own-row rules (ep::rank_rows_local_blocks, ep::own_rows_copy_percent), on the CPU:
// NOTE [EP rank rows by role] and NOTE [EP own rows first].
#include <gtest/gtest.h>

#include <optional>

#include "ep/send_roles.hpp"

namespace {

using ferry::ep::own_rows_copy_percent;
using ferry::ep::rank_rows_local_blocks;

TEST(EpSendRoles, SplitsOnlyWhereEightBlocksStayForThePeers) {
  EXPECT_EQ(rank_rows_local_blocks(24, 2, false, std::nullopt), 8);
  EXPECT_EQ(rank_rows_local_blocks(48, 2, false, std::nullopt), 8);
  EXPECT_EQ(rank_rows_local_blocks(16, 2, false, std::nullopt), 8);
  EXPECT_EQ(rank_rows_local_blocks(15, 2, false, std::nullopt), 0);  // 7 would be left for the peers
  EXPECT_EQ(rank_rows_local_blocks(24, 8, false, std::nullopt), 2);  // ceil(8 / 7)
  EXPECT_EQ(rank_rows_local_blocks(24, 3, false, std::nullopt), 4);
  EXPECT_EQ(rank_rows_local_blocks(24, 1, false, std::nullopt), 0);  // no peers
  EXPECT_EQ(rank_rows_local_blocks(1, 2, false, std::nullopt), 0);
}

TEST(EpSendRoles, QuantizingNeverSplits) {
  for (int blocks : {8, 16, 24, 48, 132})
    for (int world_size : {2, 4, 8}) EXPECT_EQ(rank_rows_local_blocks(blocks, world_size, true, std::nullopt), 0);
}

TEST(EpSendRoles, TheKnobDecidesBelowTheGrid) {
  EXPECT_EQ(rank_rows_local_blocks(24, 2, true, 12), 12);
  EXPECT_EQ(rank_rows_local_blocks(24, 2, false, 0), 0);
  EXPECT_EQ(rank_rows_local_blocks(24, 2, false, 100), 23);  // one block at least for the peers
}

TEST(EpSendRoles, TheCopyEngineTakesTheOwnRowsOfSmallGrids) {
  EXPECT_EQ(own_rows_copy_percent(7, std::nullopt), 100);
  EXPECT_EQ(own_rows_copy_percent(10, std::nullopt), 100);
  EXPECT_EQ(own_rows_copy_percent(11, std::nullopt), 0);
  EXPECT_EQ(own_rows_copy_percent(23, 50), 50);
}

}  // namespace
