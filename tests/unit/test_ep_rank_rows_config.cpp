// EpLayout::kRankRows on the CPU: its config rules, derived sizes and the path
// table's choice (src/ep/ep_args.hpp, src/ep/ep_paths.hpp), no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ep/ep_paths.hpp"
#include "ep/ep_args.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "common/expect_error.hpp"

namespace {

using ferry::EpConfig;
using ferry::EpLayout;
using ferry::EpMode;
using ferry::testing::error_message;

EpConfig rank_rows_config() {
  EpConfig c;
  c.max_tokens_per_rank = 4096;
  c.hidden = 7168;
  c.topk = 8;
  c.num_experts = 256;
  c.expert_alignment = 16;
  c.layout = EpLayout::kRankRows;
  return c;
}

TEST(EpRankRowsConfig, SizesFollowTheContract) {
  for (int world : {1, 2, 8}) {
    EpConfig c = rank_rows_config();
    ferry::ep::validate_config(c, world);
    const ferry::ep::EpDims d = ferry::ep::ep_dims(c, world);
    // One row per (token, source rank): at most world * T rows.
    EXPECT_EQ(d.capacity_rows, int64_t{world} * 4096) << world;
    // The row lists hold every (token, local expert) pair plus each expert's padding.
    EXPECT_EQ(d.index_capacity, ferry::ep::worst_case_recv_rows(c, world)) << world;
    c.max_recv_rows = 1000;
    EXPECT_EQ(ferry::ep::ep_dims(c, world).capacity_rows, 1000) << world;
    c.layout = EpLayout::kExpanded;
    EXPECT_EQ(ferry::ep::ep_dims(c, world).index_capacity, 0) << world;
  }
}

// NOTE [EP own rows first]: only rank rows order their sources that way, and every
// call's own tokens are rows, so max_recv_rows (if set) holds at least T of them.
TEST(EpRankRowsConfig, OwnRowsFirstRules) {
  EpConfig c = rank_rows_config();
  c.own_rows_first = true;
  EXPECT_NO_THROW(ferry::ep::validate_config(c, 2));
  c.max_recv_rows = 4096;
  EXPECT_NO_THROW(ferry::ep::validate_config(c, 2));
  c.max_recv_rows = 4095;
  const std::string below = error_message<ferry::InvalidArgument>([&] { ferry::ep::validate_config(c, 2); });
  EXPECT_NE(below.find("max_recv_rows (4095)"), std::string::npos) << below;
  c = rank_rows_config();
  c.own_rows_first = true;
  c.layout = EpLayout::kExpanded;
  const std::string expanded = error_message<ferry::InvalidArgument>([&] { ferry::ep::validate_config(c, 2); });
  EXPECT_NE(expanded.find("own_rows_first"), std::string::npos) << expanded;
}

// NOTE [EP zero-copy combine]: the pulled rows are rank rows (one per token and rank); with own rows first too.
TEST(EpRankRowsConfig, ZeroCopyCombineRules) {
  EpConfig c = rank_rows_config();
  c.zero_copy_combine = true;
  EXPECT_NO_THROW(ferry::ep::validate_config(c, 2));
  c.own_rows_first = true;
  EXPECT_NO_THROW(ferry::ep::validate_config(c, 2));
  c.own_rows_first = false;
  c.layout = EpLayout::kExpanded;
  const std::string expanded = error_message<ferry::InvalidArgument>([&] { ferry::ep::validate_config(c, 2); });
  EXPECT_NE(expanded.find("zero_copy_combine"), std::string::npos) << expanded;

  // combine_input() holds the dispatch output's rows, at most W * T; the standalone combine checks (no buffer, as
  // EpLayer's check_combine_args) refuse a longer input (the buffer also checks that it is combine_input()).
  c = rank_rows_config();
  c.zero_copy_combine = true;
  c.max_tokens_per_rank = 8;
  c.hidden = 256;
  EXPECT_EQ(ferry::ep::zero_copy_input_rows(c, 2), 16);
  c.max_recv_rows = 12;
  EXPECT_EQ(ferry::ep::zero_copy_input_rows(c, 2), 12);
  c.max_recv_rows = 0;
  const ferry::ep::CallContext ctx{c, 2, ferry::ep::DeviceRule{}, ferry::ep::arg_names()};
  void* fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  auto rows = [&](int64_t n) { return ferry::TensorView(fake, ferry::DataType::kBFloat16, {n, 256}); };
  EXPECT_NO_THROW(ferry::ep::validate_combine_args(ctx, 8, 16, rows(16), ferry::TensorView()));
  const std::string longer = error_message<ferry::InvalidArgument>(
      [&] { ferry::ep::validate_combine_args(ctx, 8, -1, rows(17), ferry::TensorView()); });
  EXPECT_NE(longer.find("combine_input()"), std::string::npos) << longer;
  c.zero_copy_combine = false;
  EXPECT_NO_THROW(ferry::ep::validate_combine_args(ctx, 8, -1, rows(17), ferry::TensorView()));
}

TEST(EpRankRowsConfig, LowLatencyAndUnknownLayoutsAreRefused) {
  EpConfig c = rank_rows_config();
  c.mode = EpMode::kLowLatency;
  c.expert_alignment = 1;
  const std::string ll = error_message<ferry::NotSupported>([&] { ferry::ep::validate_config(c, 2); });
  EXPECT_NE(ll.find("rank_rows"), std::string::npos) << ll;
  EXPECT_NE(ll.find("low_latency"), std::string::npos) << ll;
  c = rank_rows_config();
  c.layout = static_cast<EpLayout>(7);
  EXPECT_THROW(ferry::ep::validate_config(c, 2), ferry::InvalidArgument);
  EXPECT_STREQ(ferry::ep_layout_name(EpLayout::kRankRows), "rank_rows");
  EXPECT_STREQ(ferry::ep_layout_name(EpLayout::kExpanded), "expanded");
}

TEST(EpPaths, OneEntryPerPathAndLayout) {
  using ferry::ep::choose_path;
  const auto& intranode = choose_path(false, false, EpLayout::kExpanded, 8, 1);
  const auto& rank_rows = choose_path(false, false, EpLayout::kRankRows, 8, 1);
  const auto& direct = choose_path(true, false, EpLayout::kExpanded, 8, 2);
  const auto& hierarchical = choose_path(true, true, EpLayout::kExpanded, 8, 2);
  EXPECT_NE(&intranode, &rank_rows);
  EXPECT_NE(&direct, &hierarchical);
  // overlaps: dispatch()'s and combine()'s halves at once.
  EXPECT_TRUE(intranode.overlaps && rank_rows.overlaps && intranode.fuses_layout && rank_rows.fuses_layout);
  // The direct path overlaps its halves (NOTE [EP across nodes: pipelined ranges]; with ranges only,
  // EpBuffer::init_cross_node).
  EXPECT_TRUE(direct.overlaps);
  EXPECT_FALSE(hierarchical.overlaps || direct.fuses_layout || hierarchical.fuses_layout);
  EXPECT_EQ(rank_rows.dispatch_recv_blocks, 1);
  // NOTE [EP rank rows one grid]: only rank rows fold the receive half into the send grid.
  EXPECT_TRUE(rank_rows.dispatch_one_grid);
  EXPECT_FALSE(intranode.dispatch_one_grid || direct.dispatch_one_grid || hierarchical.dispatch_one_grid);
  for (bool hier : {false, true}) {
    const std::string across =
        error_message<ferry::NotSupported>([&] { choose_path(true, hier, EpLayout::kRankRows, 8, 2); });
    EXPECT_NE(across.find("2 nodes"), std::string::npos) << across;
    EXPECT_NE(across.find("expanded"), std::string::npos) << across;
  }
}

}  // namespace
