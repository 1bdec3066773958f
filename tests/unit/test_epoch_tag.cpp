// device::epoch_tag32 (NOTE [Epoch tags]): never 0, and distinct for the epochs a slot may still hold.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "ferry/device/epoch_tag.hpp"

namespace {

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

}  // namespace
