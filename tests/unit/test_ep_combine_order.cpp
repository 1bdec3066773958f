// The one-role combine's claim order (src/ep/combine_order.hpp, NOTE [EP combine one role]): what keeps its
// waits from deadlocking is that every item owed to a peer comes before any of this rank's own items.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "ep/combine_order.hpp"

namespace {

using ferry::ep::OneRoleOrder;

struct Walk {
  std::vector<std::tuple<int, int, int>> items;  // (source, slot, chunk) in ticket order
};

Walk walk(int rank, int world, const std::vector<int32_t>& counts, int chunks, int num_tokens) {
  OneRoleOrder order{};
  order.build(rank, world, counts.data(), chunks, num_tokens);
  Walk w;
  for (int t = 0; t < order.total(); ++t) {
    int s = -2, slot = -1, c = -1;
    order.decode(t, world, chunks, s, slot, c);
    w.items.emplace_back(s, slot, c);
  }
  return w;
}

// Random worlds 1..8, every rank, counts with zeros, 1..4 chunks: every item exactly once; every peer item before
// any own item; peers in the order rank + 1, rank + 2, ...; inside a source slot-major, then chunk; then the
// home sweep, every (token, chunk) of this rank once, after every item.
TEST(EpCombineOrder, PeersFirstOwnLastEveryItemOnce) {
  std::mt19937 rng(20261127);
  for (int round = 0; round < 400; ++round) {
    const int world = 1 + int(rng() % 8), chunks = 1 + int(rng() % 4);
    std::vector<int32_t> counts(world);
    for (auto& n : counts) n = rng() % 4 == 0 ? 0 : int(rng() % 40);
    for (int rank = 0; rank < world; ++rank) {
      SCOPED_TRACE("world " + std::to_string(world) + " rank " + std::to_string(rank) + " chunks " +
                   std::to_string(chunks));
      const int num_tokens = rng() % 5 == 0 ? 0 : int(rng() % 50);
      const Walk w = walk(rank, world, counts, chunks, num_tokens);
      int64_t expected = int64_t(num_tokens) * chunks;
      for (int n : counts) expected += int64_t(n) * chunks;
      ASSERT_EQ(int64_t(w.items.size()), expected);
      std::set<std::tuple<int, int, int>> seen;
      bool own_started = false, sweep_started = false;
      int previous_position = -1, previous_slot = -1, previous_chunk = -1, previous_source = -1;
      int sweep_next = 0;  // (token, chunk) flattened
      for (const auto& [s, slot, c] : w.items) {
        if (s == ferry::ep::kHomeSweep) {
          sweep_started = true;
          ASSERT_EQ(slot * chunks + c, sweep_next++) << "the sweep: every (token, chunk) once, in order";
          ASSERT_TRUE(slot < num_tokens && c < chunks);
          continue;
        }
        ASSERT_FALSE(sweep_started) << "an item after the sweep began";
        ASSERT_TRUE(s >= 0 && s < world && slot >= 0 && slot < counts[s] && c >= 0 && c < chunks);
        ASSERT_TRUE(seen.insert({s, slot, c}).second) << "item claimed twice";
        if (s == rank) own_started = true;
        ASSERT_FALSE(own_started && s != rank) << "a peer item after an own item";
        const int position = (s - rank - 1 + world) % world;  // 0 for rank + 1, world - 1 for rank itself
        ASSERT_GE(position, previous_position) << "sources out of order";
        if (s == previous_source)
          ASSERT_TRUE(slot > previous_slot || (slot == previous_slot && c == previous_chunk + 1));
        previous_position = position;
        previous_source = s;
        previous_slot = slot;
        previous_chunk = c;
      }
      ASSERT_EQ(sweep_next, num_tokens * chunks);
    }
  }
}

}  // namespace
