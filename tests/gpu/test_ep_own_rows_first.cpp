// EP rank rows with EpConfig::own_rows_first (NOTE [EP own rows first]): this
// rank's every token first (rows of tokens with no expert here carry -1 ids and
// 0 weights, and no list entry), then the other sources in rank order; the
// copy engine writes the own rows where nothing is quantized, the send kernel
// where it quantizes, and the share FERRY_EP_OWN_ROWS_COPY_PERCENT leaves it. Each round is checked against
// the host reference (ep_rank_rows_round.hpp: placement, data, routing, lists,
// combine), outputs poisoned before it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/ep_overflow_case.hpp"
#include "gpu/ep_rank_rows_round.hpp"
#include "gpu/sm_hog.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

EpConfig own_first_config(DataType dtype, int tokens, int hidden, int topk, int local_experts, int alignment,
                          int num_sms = 0) {
  return rank_rows_config(dtype, tokens, hidden, topk, local_experts, true, alignment, num_sms,
                          /*own_rows_first=*/true);
}

// Sets FERRY_EP_OWN_ROWS_COPY_PERCENT for the buffers built in its scope ("": the
// default, the copy engine for all own rows with at most 8 send blocks, else none).
struct OwnRowsCopy {
  explicit OwnRowsCopy(const char* percent) {
    if (*percent != '\0') setenv("FERRY_EP_OWN_ROWS_COPY_PERCENT", percent, 1);
  }
  ~OwnRowsCopy() { unsetenv("FERRY_EP_OWN_ROWS_COPY_PERCENT"); }
};

// bf16 and fp8 input (scales too) with the copy engine writing all own rows,
// part of them (the send kernel the rest, by role and mixed), none, and the
// default (none at 20 and 9 SMs, all at 4); fp8 quantized (the send kernel:
// own-row blocks by role at 20 SMs, mixed at 9); routing uniform, skewed and
// with -1 experts, zero-token ranks, halves, int64 ids, alignment.
TEST(EpOwnRowsFirst, RowsAndCombine) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  struct Case {
    const char* percent;
    DataType dtype;
    bool fp8_input;
    int sms, alignment;
  };
  const Case cases[] = {{"", DataType::kBFloat16, false, 20, 1},     {"", DataType::kBFloat16, false, 9, 16},
                        {"", DataType::kBFloat16, false, 4, 1},      {"", DataType::kFloat8E4M3, true, 4, 1},
                        {"100", DataType::kBFloat16, false, 20, 1},  {"100", DataType::kFloat8E4M3, true, 9, 1},
                        {"", DataType::kFloat8E4M3, false, 20, 1},   {"", DataType::kFloat8E4M3, false, 9, 128},
                        {"60", DataType::kBFloat16, false, 20, 1},   {"37", DataType::kFloat8E4M3, true, 9, 8},
                        {"0", DataType::kBFloat16, false, 4, 1}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string("FERRY_EP_OWN_ROWS_COPY_PERCENT='") + k.percent + "' " + dtype_id(k.dtype) +
                 (k.fp8_input ? " fp8 input" : "") + " sms=" + std::to_string(k.sms));
    const OwnRowsCopy copy(k.percent);
    Harness h(shared(), own_first_config(k.dtype, 300, 2048, 8, 4, k.alignment, k.sms));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions o;
    o.fp8_input = k.fp8_input;
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
    RoundOptions halves = halves_apart();
    halves.fp8_input = k.fp8_input;
    halves.idx64 = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, halves));
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, o));
    ASSERT_TRUE(run_round(h, ep::Routing::kNone, ep::TokenCounts::kVaried, o));  // every own row -1, no lists
  }
}

// Skew: every token onto one expert, or onto the last rank (the others' own rows
// then pick nothing here); all-zero and only-rank-0 token counts; unsynchronized
// counts; top-1 and a hidden size of one 128-column group.
TEST(EpOwnRowsFirst, SkewAndEdges) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const int W = mpi_size();
  {
    Harness h(shared(), own_first_config(DataType::kBFloat16, 96, 2048, 4, 3, 64));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    const int E = h.config().num_experts;
    ASSERT_TRUE(run_round(h, ep::Routing::kOneExpert, ep::TokenCounts::kFull, {}, E - 1));
    ASSERT_TRUE(run_round(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, W - 1));
    for (auto counts : {ep::TokenCounts::kOnlyRank0, ep::TokenCounts::kAllZero, ep::TokenCounts::kSomeZero})
      ASSERT_TRUE(run_round(h, ep::Routing::kDrops, counts));
    RoundOptions unsynced;
    unsynced.sync_counts = false;
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, unsynced));
  }
  {
    Harness h(shared(), own_first_config(DataType::kBFloat16, 64, 128, 1, 1, 1, 4));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kFull));
  }
}

// Dispatch + combine captured in one graph (the copy engine's fork and join are
// graph nodes then) and replayed: bf16 on 8 SMs (one grid, NOTE [EP rank rows
// one grid], and the copy engine) and fp8 input on 24 (two grids, no copy
// engine); then many tokens (several layout blocks) on 1 and 4 SMs.
TEST(EpOwnRowsFirst, GraphAndManyTokens) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const RankRowsConfig config = [](DataType dtype, int tokens, int alignment, int sms) {
    return own_first_config(dtype, tokens, 2048, 8, 4, alignment, sms);
  };
  ASSERT_TRUE(graph_and_many_tokens(config, /*bf16_sms=*/8, /*last_in_graph=*/true, {1, 4}));
}

// While a stand-in for the user's kernels holds all SMs but 1 or 3, the few free
// SMs (and the copy engine on 8 SMs, in one grid) finish the dispatch, overlapped
// and as halves; the default contract on 8 SMs (one grid) too.
TEST(EpOwnRowsFirst, FewFreeSms) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const std::string why = SmHog::unusable_reason(shared().comm->ranks_sharing_device());
  if (!why.empty()) GTEST_SKIP() << "RESTRICTED-SM TEST SKIPPED: " << why;
  for (const auto& [own_first, sms] : {std::pair{true, 24}, std::pair{true, 8}, std::pair{false, 8}}) {
    SCOPED_TRACE(std::string(own_first ? "own rows first" : "rank order") + " sms=" + std::to_string(sms));
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 1024, 1024, 8, 4, true, 1, sms, own_first));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(rounds_on_few_free_sms(h));
  }
}

// Too many rows for rank 0 fails on every rank (NOTE [EP overflow is collective]),
// then a dispatch that fits works; max_recv_rows below max_tokens_per_rank is
// refused at construction (the own rows alone would not fit).
TEST(EpOwnRowsFirst, RecvRowsLimits) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  constexpr int T = 16, H = 512, K = 2;
  const int W = mpi_size();
  EpConfig cfg = own_first_config(DataType::kBFloat16, T, H, K, 2, 1);
  cfg.max_recv_rows = T - 1;
  EXPECT_THROW(ferry::validate_ep_config(cfg, W), ferry::InvalidArgument);
  if (W < 2) GTEST_SKIP() << "one rank: its own rows are all it receives, and they always fit";
  cfg.max_recv_rows = int64_t{W} * T - 1;
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  forget_previous_round();
  expect_overflow_then_a_dispatch_that_fits(h, T, H, K);
}

}  // namespace
