// Whether an expanded low-latency EpBuffer inside a node sends through staging rows (NOTE [EP staged low latency],
// ep::stages_low_latency_rows), on the CPU: the measured rule by a rank's largest call's rows, the default, the knob.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ep/ep_memory_plan.hpp"

namespace {

using ferry::ep::stages_low_latency_rows;

class StagedRowsTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("FERRY_EP_LL_STAGED"); }
  void TearDown() override { SetUp(); }
};

TEST_F(StagedRowsTest, UpToEightMiBOfRows) {
  using ferry::ep::staged_rows_fit;
  EXPECT_TRUE(staged_rows_fit(1, 7168, false));
  EXPECT_TRUE(staged_rows_fit(512, 7168, false));   // 7.3 MB of bf16 rows: staged 0.841, its combine 0.980
  EXPECT_FALSE(staged_rows_fit(768, 7168, false));  // 11 MB of bf16 rows: the combine after it read 1.007
  EXPECT_TRUE(staged_rows_fit(512, 8192, false));   // exactly 8 MiB
  EXPECT_FALSE(staged_rows_fit(513, 8192, false));
  EXPECT_TRUE(staged_rows_fit(768, 7168, true));    // 5.5 MB of fp8 rows: staged 0.751
  EXPECT_TRUE(staged_rows_fit(1024, 8192, true));   // exactly 8 MiB
  EXPECT_FALSE(staged_rows_fit(1025, 8192, true));
}

TEST_F(StagedRowsTest, UnsetStagesRowsThatFit) {
  EXPECT_TRUE(stages_low_latency_rows(1, 7168, true));
  EXPECT_TRUE(stages_low_latency_rows(512, 7168, true));    // 3.7 MB
  EXPECT_TRUE(stages_low_latency_rows(1024, 7168, true));   // 7.3 MB
  EXPECT_FALSE(stages_low_latency_rows(2048, 7168, true));  // 14.7 MB
  EXPECT_TRUE(stages_low_latency_rows(1, 7168, false));
  EXPECT_TRUE(stages_low_latency_rows(512, 7168, false));   // 7.3 MB
  EXPECT_FALSE(stages_low_latency_rows(768, 7168, false));  // 11 MB
}

TEST_F(StagedRowsTest, TheKnobDecides) {
  setenv("FERRY_EP_LL_STAGED", "1", 1);
  EXPECT_TRUE(stages_low_latency_rows(4096, 7168, false));
  setenv("FERRY_EP_LL_STAGED", "0", 1);
  EXPECT_FALSE(stages_low_latency_rows(1, 7168, true));
}

}  // namespace

// NOTE [EP staged low latency]: the staged receive lays every source out in shared memory (bitmaps of max_tokens
// bits per local expert of every source); shapes where that does not fit stay direct.
TEST(StagedReceive, FitsUpToFortyKiBOfLayout) {
  using ferry::ep::staged_receive_fits;
  EXPECT_TRUE(staged_receive_fits(2, 256, 1));
  EXPECT_TRUE(staged_receive_fits(2, 256, 512));   // the measured shape: 26.7 KiB
  EXPECT_TRUE(staged_receive_fits(8, 256, 512));
  EXPECT_TRUE(staged_receive_fits(2, 256, 800));
  EXPECT_FALSE(staged_receive_fits(2, 256, 1024));  // 50.9 KiB
  EXPECT_FALSE(staged_receive_fits(2, 1024, 512));
}
