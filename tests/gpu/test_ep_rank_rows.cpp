// EP with EpLayout::kRankRows on real GPUs: the matrix and the cases of one
// checked round each (ep_rank_rows_round.hpp: placement, data, routing, lists,
// combine against the host reference, outputs poisoned before each round).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/ep_rank_rows_round.hpp"
#include "gpu/ep_overflow_case.hpp"
#include "gpu/sm_hog.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;
using ferry::EpLayout;

// dtype x (hidden, topk, local experts, routing, counts, index type, weights, alignment, API).
using Row = MatrixRow;
const std::vector<Row> kRows = {
    {2048, 1, 1, ep::Routing::kUniform, ep::TokenCounts::kVaried, false, true, 1, true, false},
    {4096, 2, 3, ep::Routing::kDrops, ep::TokenCounts::kFull, true, true, 128, true, false},
    {2048, 3, 4, ep::Routing::kZipf, ep::TokenCounts::kSomeZero, false, true, 128, false, false},
    {7168, 4, 8, ep::Routing::kDrops, ep::TokenCounts::kVaried, true, true, 1, true, true},
    {4096, 6, 4, ep::Routing::kUniform, ep::TokenCounts::kVaried, true, false, 16, true, false},
    {2048, 7, 1, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, false, true, 1, false, true},
    {7168, 8, 8, ep::Routing::kZipf, ep::TokenCounts::kVaried, true, true, 128, true, false},
    {1152, 5, 2, ep::Routing::kUniform, ep::TokenCounts::kSomeZero, false, true, 1, true, true},  // 9 scale groups
};

class EpRankRows : public ::testing::TestWithParam<std::tuple<DataType, int>> {};

// Two rounds per buffer, different routing and token counts.
TEST_P(EpRankRows, DispatchCombine) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const auto [dtype, index] = GetParam();
  const Row& row = kRows[size_t(index)];
  Harness h(shared(), rank_rows_config(dtype, 256, row.hidden, row.topk, row.local_experts, row.weights, row.alignment));
  ASSERT_TRUE(h.alive());
    forget_previous_round();
  RoundOptions o;
  o.idx64 = row.idx64;
  o.sync_counts = row.sync_counts;
  o.halves = row.halves;
  ASSERT_TRUE(run_round(h, row.routing, row.counts, o));
  ASSERT_TRUE(run_round(h, row.routing == ep::Routing::kZipf ? ep::Routing::kDrops : ep::Routing::kZipf,
                  ep::TokenCounts::kVaried, o));
}

INSTANTIATE_TEST_SUITE_P(Ep, EpRankRows,
                         ::testing::Combine(::testing::Values(DataType::kBFloat16, DataType::kFloat8E4M3),
                                            ::testing::Range(0, int(kRows.size()))),
                         [](const auto& info) {
                           const Row& r = kRows[size_t(std::get<1>(info.param))];
                           return std::string(dtype_id(std::get<0>(info.param))) + "_h" + std::to_string(r.hidden) +
                                  "_k" + std::to_string(r.topk) + "_le" + std::to_string(r.local_experts);
                         });

// fp8 input, skew onto one expert / one rank (the worst case the buffer holds),
// zero-token ranks, several layout blocks (1000 tokens), few SMs, handle reuse,
// graph capture and replay.
TEST(EpRankRowsCases, SkewZeroTokensFp8InputManyTokens) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const int W = mpi_size();
  {
    Harness h(shared(), rank_rows_config(DataType::kFloat8E4M3, 96, 2048, 4, 3, true, 1));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions o;
    o.fp8_input = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, o));
  }
  for (int align : {1, 64}) {
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 96, 2048, 4, 3, true, align));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    const int E = h.config().num_experts;
    ASSERT_TRUE(run_round(h, ep::Routing::kOneExpert, ep::TokenCounts::kFull, {}, E - 1));
    ASSERT_TRUE(run_round(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, W - 1));
    for (auto counts : {ep::TokenCounts::kOnlyRank0, ep::TokenCounts::kSomeZero, ep::TokenCounts::kAllZero})
      ASSERT_TRUE(run_round(h, ep::Routing::kDrops, counts));
    ASSERT_TRUE(run_round(h, ep::Routing::kNone, ep::TokenCounts::kFull));
  }
  for (int sms : {1, 4}) {
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 1000, 2048, 8, 4, true, 1, sms));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions o;
    o.idx64 = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
  }
  {
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 200, 2048, 8, 4, true, 8));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions o;
    o.graph = true;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, o));
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
  }
}

// EpBuffer::route ahead of rank-rows dispatches (a side stream joined by an
// event): skewed and -1 routing, zero-token ranks, the halves, fp8 input, several
// layout blocks, own rows first; each round checked in full.
TEST(EpRankRowsCases, RouteAhead) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  RoundOptions ahead;
  ahead.route_ahead = true;
  {
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 1000, 2048, 8, 4, true, 8));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, ahead));
    RoundOptions halves = halves_apart();
    halves.route_ahead = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, halves));
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull));  // a plain dispatch between
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, ahead));
  }
  {
    Harness h(shared(), rank_rows_config(DataType::kFloat8E4M3, 96, 2048, 4, 3, true, 1));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions fp8 = ahead;
    fp8.fp8_input = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, fp8));
  }
  {
    Harness h(shared(), rank_rows_config(DataType::kBFloat16, 200, 2048, 8, 4, true, 1, 8, /*own_rows_first=*/true));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, ahead));
  }
}

// NOTE [EP rank rows by role]: the send blocks split into peer-row and own-row
// groups (the default where 8 blocks remain for the peers: 20 SMs), every block
// writing every destination (FERRY_EP_RANK_ROWS_LOCAL_BLOCKS=0, and the default
// on 9 SMs), one own-row block, and more than there are blocks (clamped): the
// same rows and sums, checked against the reference, with bf16 and fp8
// (quantized in the send kernel), halves and overlapped.
TEST(EpRankRowsCases, SendBlocksByRoleOrMixed) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const std::pair<const char*, int> cases[] = {{"", 20}, {"", 9}, {"0", 20}, {"1", 9}, {"1000", 9}};
  for (const auto& [local_blocks, sms] : cases) {
    for (DataType dtype : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
      SCOPED_TRACE(std::string("FERRY_EP_RANK_ROWS_LOCAL_BLOCKS='") + local_blocks + "' sms=" + std::to_string(sms) +
                   " " + dtype_id(dtype));
      setenv("FERRY_EP_RANK_ROWS_LOCAL_BLOCKS", local_blocks, 1);
      Harness h(shared(), rank_rows_config(dtype, 300, 2048, 8, 4, true, 1, sms));
      unsetenv("FERRY_EP_RANK_ROWS_LOCAL_BLOCKS");
      ASSERT_TRUE(h.alive());
      forget_previous_round();
      ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
      ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, halves_apart()));
      ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero));
    }
  }
}

// While a stand-in for the user's kernels holds all SMs but 1 or 3, rank rows
// progress (dispatch() overlaps its one receive block; the halves apart too).
TEST(EpRankRowsCases, FewFreeSms) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const std::string why = SmHog::unusable_reason(shared().comm->ranks_sharing_device());
  if (!why.empty()) GTEST_SKIP() << "RESTRICTED-SM TEST SKIPPED: " << why;
  Harness h(shared(), rank_rows_config(DataType::kBFloat16, 1024, 1024, 8, 4, true, 1));
  ASSERT_TRUE(h.alive());
    forget_previous_round();
  RoundOptions halves;
  halves.halves = true;
  // Once without the hog: buffers sized and kernels loaded (a cudaFree or a lazy
  // load would wait for the hog, NOTE in test_restricted_sms.cpp).
  ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
  ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, halves));
  for (int free_sms : {1, 3}) {
    SCOPED_TRACE(std::to_string(free_sms) + " free SMs");
    std::unique_ptr<SmHog> hog = hold_sms_on_every_rank(free_sms);
    ASSERT_TRUE(hog != nullptr);
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, halves));
  }
}

// Every token of every rank picks rank 0, whose output holds one row fewer than
// the W * T rank rows that needs: every rank's dispatch fails, naming rank 0 and
// max_recv_rows (NOTE [EP overflow is collective]); then a dispatch that fits
// (no token picks an expert) and its combine work everywhere.
TEST(EpRankRowsCases, RecvRowsOverflowFailsOnEveryRank) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  constexpr int T = 16, H = 512, K = 2;
  const int W = mpi_size();
  EpConfig cfg = rank_rows_config(DataType::kBFloat16, T, H, K, 2, true, 1);
  cfg.max_recv_rows = int64_t{W} * T - 1;
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  forget_previous_round();
  expect_overflow_then_a_dispatch_that_fits(h, T, H, K);
}

// Low-latency mode and cross-node communicators refuse the layout with NotSupported.
TEST(EpRankRowsCases, RefusedWhereNotSupported) {
  REQUIRE_EP();
  EpConfig c = rank_rows_config(DataType::kBFloat16, 64, 1024, 2, 2, true, 1);
  c.mode = EpMode::kLowLatency;
  c.expert_alignment = 1;
  EXPECT_THROW(ferry::validate_ep_config(c, mpi_size()), ferry::NotSupported);
  if (shared().comm->topology().num_nodes > 1) {
    c.mode = EpMode::kHighThroughput;
    EXPECT_THROW(EpBuffer(*shared().comm, c), ferry::NotSupported);
  }
}

}  // namespace
