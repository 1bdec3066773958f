// device::epoch_tag32 (NOTE [Epoch tags]): never 0, and distinct for the epochs a slot may still hold.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ferry/device/epoch_tag.hpp"

namespace {

using ferry::device::epoch_after;
using ferry::device::epoch_tag32;

constexpr uint64_t kPeriod = 0xffffffffull;  // 2^32 - 1

TEST(EpochTag, IsEpochModPeriodPlusOne) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 200000; ++i) {
    const uint64_t e = rng();
    ASSERT_EQ(epoch_tag32(e), static_cast<uint32_t>(e % kPeriod) + 1u) << e;
  }
  for (uint64_t e : {uint64_t{0}, uint64_t{1}, kPeriod - 1, kPeriod, kPeriod + 1, uint64_t{1} << 32,
                     (uint64_t{1} << 32) + 1, 2 * kPeriod, 2 * kPeriod + 1, uint64_t{1} << 63, ~uint64_t{0},
                     ~uint64_t{0} - 1})
    EXPECT_EQ(epoch_tag32(e), static_cast<uint32_t>(e % kPeriod) + 1u) << e;
}

// Where the low 32 bits of the epoch are 0 (every 2^32 calls) the tag is not: a zeroed word never reads as a
// call's. And a slot's tag differs from the tags of the one and two calls before it there as everywhere.
TEST(EpochTag, NeverZeroAndDistinctAcrossTheLow32BitsWrap) {
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{0xfffffff0}}) {
    for (uint64_t e = (k << 32) - 4; e <= (k << 32) + 4; ++e) {
      EXPECT_NE(epoch_tag32(e), 0u) << e;
      EXPECT_NE(epoch_tag32(e), epoch_tag32(e - 1)) << e;
      EXPECT_NE(epoch_tag32(e), epoch_tag32(e - 2)) << e;
    }
  }
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 100000; ++i) {
    const uint64_t e = rng() | 2;  // e - 2 does not wrap
    ASSERT_NE(epoch_tag32(e), 0u) << e;
    ASSERT_NE(epoch_tag32(e), epoch_tag32(e - 1)) << e;
    ASSERT_NE(epoch_tag32(e), epoch_tag32(e - 2)) << e;
  }
  // Two epochs share a tag only a whole period apart.
  EXPECT_EQ(epoch_tag32(12345), epoch_tag32(12345 + kPeriod));
}

// The AllReduce counter (NOTE [AllReduce epoch]): launches read 1, 2, 3, ... and never an epoch whose low 32 bits,
// the LL lines' tag, are 0; epochs increase, consecutive ones alternate parity, and a tag comes back only 2^32
// epochs later.
TEST(EpochTag, EpochAfterSkipsZeroTagsAndKeepsParity) {
  EXPECT_EQ(epoch_after(0), 1u);
  EXPECT_EQ(epoch_after(1), 2u);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<uint64_t> starts = {1, (uint64_t{1} << 32) - 5, (uint64_t{3} << 32) - 5,
                                  ~uint64_t{0} - (uint64_t{1} << 33)};
  for (int i = 0; i < 1000; ++i) starts.push_back(rng() >> 1);
  for (uint64_t start : starts) {
    uint64_t epoch = start | 1;  // a launch's epoch: never a zero tag itself
    for (int step = 0; step < 12; ++step) {
      const uint64_t next = epoch_after(epoch);
      ASSERT_GT(next, epoch);
      ASSERT_LE(next - epoch, 3u);
      ASSERT_NE(static_cast<uint32_t>(next), 0u) << next;
      ASSERT_NE(next & 1, epoch & 1) << epoch;
      ASSERT_NE(static_cast<uint32_t>(next), static_cast<uint32_t>(epoch));
      epoch = next;
    }
  }
  // Across the wrap: ..., 2^32 - 1, then 2^32 + 2 (2^32 is skipped, and 2^32 + 1 to keep the parity).
  EXPECT_EQ(epoch_after((uint64_t{1} << 32) - 1), (uint64_t{1} << 32) + 2);
  EXPECT_EQ(epoch_after((uint64_t{1} << 32) - 2), (uint64_t{1} << 32) - 1);
}

}  // namespace
