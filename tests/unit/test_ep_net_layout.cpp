// The cross-node EP path's memory (src/ep/internode_params.hpp, ep_memory_plan.hpp),
// no GPU: the window's boxes are disjoint, in order, aligned for 16-byte
// stores, and a slot holds a header with every expert's count plus max_tokens
// records (routing record, row, fp8 scales); the dispatch output lies after the
// local regions the intranode plan defines (so bind_local / zero_local apply
// unchanged).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>

#include "ep/ep_memory_plan.hpp"
#include "ep/ep_params.hpp"
#include "ep/internode_params.hpp"

namespace {

using ferry::ep::NetLayout;
using ferry::ep::Params;

Params shape(int world, int tokens, int hidden, int topk, int experts, bool fp8, bool low_latency) {
  Params p{};
  p.world_size = world;
  p.rank = 0;
  p.max_tokens = tokens;
  p.hidden = hidden;
  p.topk = topk;
  p.num_experts = experts;
  p.local_experts = experts / world;
  p.fp8_out = fp8;
  p.low_latency = low_latency;
  p.capacity_per_expert = low_latency ? int64_t{world} * tokens : 0;
  p.capacity_rows = low_latency ? int64_t{experts / world} * world * tokens
                                : int64_t{world} * tokens * std::min(topk, experts / world);
  p.meta_bytes = ferry::ep::meta_record_bytes(topk);
  p.chunk_cols = 2048;
  p.num_chunks = (hidden + 2047) / 2048;
  return p;
}

TEST(EpNetLayout, BoxesAreDisjointAlignedAndHoldEverySlot) {
  for (int world : {2, 4, 8})
    for (int hidden : {128, 2048, 7168})
      for (bool fp8 : {false, true})
        for (int topk : {1, 5, 16}) {
          SCOPED_TRACE(::testing::Message() << "W " << world << " H " << hidden << " K " << topk << (fp8 ? " fp8" : " bf16"));
          const int tokens = 257, experts = world * 4 < topk ? topk * world : world * 4;
          const Params p = shape(world, tokens, hidden, topk, experts, fp8, false);
          const NetLayout l = ferry::ep::net_layout(p);
          const uint64_t W = static_cast<uint64_t>(world);
          // Header: the token count, then every expert's count.
          EXPECT_GE(l.header_bytes, sizeof(int32_t) * (ferry::ep::kHeaderCounts + static_cast<uint64_t>(experts)));
          // Record: routing record, row, scales.
          // NOTE [EP across nodes: aligned records]: whole lines for the header, every record and its row.
          EXPECT_EQ(l.row_offset, (p.meta_bytes + ferry::ep::kRecordAlign - 1) / ferry::ep::kRecordAlign *
                                      ferry::ep::kRecordAlign);
          for (uint64_t v : {l.header_bytes, l.record_bytes, l.row_offset, l.scales_offset})
            EXPECT_EQ(v % ferry::ep::kRecordAlign, 0u) << v;
          EXPECT_GE(l.row_offset, sizeof(int32_t) * (1 + 3 * static_cast<uint64_t>(topk)));
          EXPECT_EQ(l.scales_offset, l.row_offset + static_cast<uint64_t>(hidden) * (fp8 ? 1 : 2));
          EXPECT_GE(l.record_bytes, l.scales_offset + (fp8 ? sizeof(float) * (hidden / 128) : 0));
          EXPECT_GE(l.dispatch_slot, l.header_bytes + static_cast<uint64_t>(tokens) * l.record_bytes);
          EXPECT_GE(l.combine_slot, static_cast<uint64_t>(tokens) * hidden * 2);
          for (uint64_t v : {l.header_bytes, l.record_bytes, l.row_offset, l.scales_offset, l.dispatch_slot,
                             l.combine_slot, l.dispatch_in, l.dispatch_out, l.combine_in, l.combine_out})
            EXPECT_EQ(v % 16, 0u) << v;
          // [2 parity][W] slots each, one region after the other.
          EXPECT_EQ(l.dispatch_in, 0u);
          EXPECT_EQ(l.dispatch_out, l.dispatch_in + 2 * W * l.dispatch_slot);
          EXPECT_EQ(l.combine_in, l.dispatch_out + 2 * W * l.dispatch_slot);
          EXPECT_EQ(l.combine_out, l.combine_in + 2 * W * l.combine_slot);
          EXPECT_EQ(l.total, l.combine_out + 2 * W * l.combine_slot);

          const ferry::ep::NetMemoryPlan plan = ferry::ep::plan_net_memory(p, true);
          EXPECT_EQ(plan.window.total, l.total);
          EXPECT_GE(plan.out_tokens, plan.local.total);
          EXPECT_GE(plan.out_scales, plan.out_tokens + static_cast<uint64_t>(p.capacity_rows) * hidden * (fp8 ? 1 : 2));
          EXPECT_GE(plan.total, plan.out_scales + (fp8 ? sizeof(float) * p.capacity_rows * (hidden / 128) : 0));
          EXPECT_EQ(plan.out_tokens % 16, 0u);
          EXPECT_EQ(plan.out_scales % 16, 0u);
        }
}

// The hierarchical path's boxes (NOTE [EP hierarchical]): after the direct
// path's, disjoint, aligned; a forward slot holds its header (per local rank
// token counts, the record count, every expert's count) and max_tokens records
// (prefix of mask and per-local-rank slots, then a dispatch record, so the row
// and scales sit at the same offsets past the prefix); the local arrays hold
// [max_tokens][nodes] indices and [nodes][max_tokens] prefixes.
TEST(EpNetLayout, HierarchicalBoxesFollowTheDirectOnes) {
  using ferry::ep::HierLayout;
  for (auto [nodes, per_node] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}, std::pair{2, 3}})
    for (int hidden : {128, 7168})
      for (bool fp8 : {false, true})
        for (int topk : {1, 8}) {
          SCOPED_TRACE(::testing::Message() << nodes << "x" << per_node << " H " << hidden << " K " << topk
                                            << (fp8 ? " fp8" : " bf16"));
          const int world = nodes * per_node, tokens = 257, experts = world * 4 < topk ? topk * world : world * 4;
          const Params p = shape(world, tokens, hidden, topk, experts, fp8, false);
          const NetLayout l = ferry::ep::net_layout(p);
          const HierLayout h = ferry::ep::hier_layout(p, l, nodes, per_node);
          const uint64_t N = static_cast<uint64_t>(nodes), R = static_cast<uint64_t>(per_node), T = tokens;
          EXPECT_GE(h.fwd_header_bytes, sizeof(int32_t) * (ferry::ep::kFwdHeaderCounts + static_cast<uint64_t>(experts)));
          EXPECT_GT(ferry::ep::kFwdHeaderRecords, ferry::ep::kFwdHeaderTokens + per_node - 1);
          EXPECT_GT(ferry::ep::kFwdHeaderCounts, ferry::ep::kFwdHeaderRecords);
          EXPECT_GE(ferry::ep::kFwdPrefixWords, ferry::ep::kFwdSlots + per_node);
          EXPECT_EQ(h.fwd_record_bytes, sizeof(int32_t) * ferry::ep::kFwdPrefixWords + l.record_bytes);
          EXPECT_GE(h.fwd_slot, h.fwd_header_bytes + T * h.fwd_record_bytes);
          EXPECT_GE(h.cfwd_slot, T * hidden * 2);
          for (uint64_t v : {h.fwd_header_bytes, h.fwd_record_bytes, h.fwd_slot, h.fwd_in, h.fwd_out, h.cfwd_slot,
                             h.cfwd_in, h.total})
            EXPECT_EQ(v % 16, 0u) << v;
          EXPECT_GE(h.fwd_in, l.total);  // the direct path's boxes are unchanged
          EXPECT_EQ(h.fwd_out, h.fwd_in + 2 * N * h.fwd_slot);
          EXPECT_EQ(h.cfwd_in, h.fwd_out + 2 * N * h.fwd_slot);
          EXPECT_EQ(h.total, h.cfwd_in + 2 * R * N * h.cfwd_slot);

          const ferry::ep::HierLocalPlan lp = ferry::ep::plan_hier_local(tokens, nodes);
          EXPECT_GE(lp.fwd_index, lp.fwd_count + sizeof(int32_t) * ferry::ep::kMaxRanks);
          EXPECT_GE(lp.fwd_records, lp.fwd_index + sizeof(int32_t) * T * N);
          EXPECT_GE(lp.fwd_record_count, lp.fwd_records + sizeof(int32_t) * N * T * ferry::ep::kFwdPrefixWords);
          EXPECT_GE(lp.blocks_done, lp.fwd_record_count + sizeof(int32_t) * ferry::ep::kMaxRanks);
          EXPECT_GE(lp.total, lp.blocks_done + 2 * sizeof(unsigned));
        }
}

// NOTE [EP across nodes: range size]: ranges carry at least the asked bytes (or a whole box), there are
// at most kMaxNetRanges of them, and together they cover every slot, for dispatch records and combine rows.
TEST(EpNetLayout, RangesCoverEverySlotWithinTheirLimits) {
  for (int tokens : {1, 128, 257, 4096, 16384})
    for (int hidden : {128, 2048, 7168})
      for (bool fp8 : {false, true})
        for (uint64_t min_bytes : {uint64_t{512} << 10, uint64_t{4} << 20, UINT64_MAX}) {
          SCOPED_TRACE(::testing::Message() << "T " << tokens << " H " << hidden << (fp8 ? " fp8" : " bf16")
                                            << " min " << min_bytes);
          const Params p = shape(2, tokens, hidden, 8, 16, fp8, false);
          NetLayout l = ferry::ep::net_layout(p);
          ferry::ep::set_net_ranges(l, p, min_bytes);
          const uint64_t T = static_cast<uint64_t>(tokens), row_bytes = static_cast<uint64_t>(hidden) * 2;
          for (auto [per_range, ranges, item_bytes] :
               {std::tuple<uint64_t, uint64_t, uint64_t>{l.range_records, l.max_ranges, l.record_bytes},
                std::tuple<uint64_t, uint64_t, uint64_t>{l.combine_range_rows, l.combine_max_ranges, row_bytes}}) {
            EXPECT_GE(per_range, 1u);
            EXPECT_LE(per_range, T);
            EXPECT_LE(ranges, static_cast<uint64_t>(ferry::ep::kMaxNetRanges));
            EXPECT_EQ(ranges, (T + per_range - 1) / per_range);  // every slot in one range
            // At least the asked bytes, unless one range is the whole box.
            if (per_range < T) EXPECT_GE(per_range * item_bytes, std::min<uint64_t>(min_bytes, T * item_bytes));
          }
          if (min_bytes == UINT64_MAX) EXPECT_EQ(l.max_ranges, 1u);
        }
}

}  // namespace
