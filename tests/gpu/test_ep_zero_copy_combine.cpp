// EP rank rows with EpConfig::zero_copy_combine (NOTE [EP zero-copy combine]): the caller's combine input rows go
// into EpBuffer::combine_input(), and each home pulls its tokens' rows from the other ranks while it sums them.
// Every round is checked against the host reference (ep_rank_rows_round.hpp: placement, data, routing, lists,
// and the combine's sums), outputs poisoned before it; rounds follow each other on one buffer, with fresh inputs,
// so a home reading a rank's rows of the previous call would show as a wrong sum.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "common/expect_error.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/ep_overflow_case.hpp"
#include "gpu/ep_rank_rows_round.hpp"
#include "gpu/sm_hog.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

EpConfig zero_copy_config(DataType dtype, int tokens, int hidden, int topk, int local_experts, bool weights,
                          int alignment, int num_sms = 0, bool own_rows_first = false) {
  return rank_rows_config(dtype, tokens, hidden, topk, local_experts, weights, alignment, num_sms, own_rows_first,
                          /*zero_copy_combine=*/true);
}

// bf16, fp8 quantized in the kernel and fp8 input; 20, 9 and 4 SMs; own rows first or rank order; routing uniform,
// skewed and with -1 experts; ranks with no tokens; halves; int64 ids; with and without weights; 3 rounds a buffer.
TEST(EpZeroCopyCombine, RowsAndCombine) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  struct Case {
    DataType dtype;
    bool fp8_input, own_first, weights;
    int sms, alignment, hidden, topk, local_experts;
  };
  const Case cases[] = {
      {DataType::kBFloat16, false, false, true, 20, 1, 2048, 8, 4},
      {DataType::kBFloat16, false, true, true, 9, 16, 7168, 4, 8},
      {DataType::kBFloat16, false, false, false, 4, 1, 1024, 2, 3},
      {DataType::kFloat8E4M3, true, false, true, 9, 1, 4096, 6, 4},
      {DataType::kFloat8E4M3, false, false, true, 20, 128, 2048, 8, 4},
      {DataType::kFloat8E4M3, false, true, true, 4, 1, 1152, 5, 2},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(dtype_id(k.dtype)) + (k.fp8_input ? " fp8 input" : "") +
                 (k.own_first ? " own rows first" : "") + " sms=" + std::to_string(k.sms) +
                 " hidden=" + std::to_string(k.hidden));
    Harness h(shared(), zero_copy_config(k.dtype, 300, k.hidden, k.topk, k.local_experts, k.weights, k.alignment,
                                         k.sms, k.own_first));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    RoundOptions o;
    o.fp8_input = k.fp8_input;
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
    RoundOptions halves = halves_apart();
    halves.fp8_input = k.fp8_input;
    halves.idx64 = true;
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, halves));
    RoundOptions unsynced = o;
    unsynced.sync_counts = false;
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, unsynced));
  }
}

// Dispatch + combine captured in one CUDA graph and replayed (the rows written before each replay), then the same
// buffer outside the graph; many tokens on 1 and 8 SMs.
TEST(EpZeroCopyCombine, GraphAndManyTokens) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const RankRowsConfig config = [](DataType dtype, int tokens, int alignment, int sms) {
    return zero_copy_config(dtype, tokens, 2048, 8, 4, true, alignment, sms);
  };
  ASSERT_TRUE(graph_and_many_tokens(config, /*bf16_sms=*/8, /*last_in_graph=*/false, {1, 8}));
}

// While a stand-in for the user's kernels holds all SMs but 1 or 3, the free SMs finish the pull combine, overlapped
// (one send block, the rest receiving) and as halves.
TEST(EpZeroCopyCombine, FewFreeSms) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const std::string why = SmHog::unusable_reason(shared().comm->ranks_sharing_device());
  if (!why.empty()) GTEST_SKIP() << "RESTRICTED-SM TEST SKIPPED: " << why;
  for (int sms : {24, 8}) {
    SCOPED_TRACE("sms=" + std::to_string(sms));
    Harness h(shared(), zero_copy_config(DataType::kBFloat16, 1024, 1024, 8, 4, true, 1, sms));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(rounds_on_few_free_sms(h));
  }
}

// Misuse is refused before anything launches: another tensor as the combine's input, or the input's memory with
// more rows than it holds (on every rank, so nothing waits), combine_input() of a buffer without the option, the
// option with the expanded layout. The buffer works after the refusal.
TEST(EpZeroCopyCombine, Refusals) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  EpConfig expanded = zero_copy_config(DataType::kBFloat16, 64, 1024, 2, 2, true, 1);
  expanded.layout = ferry::EpLayout::kExpanded;
  EXPECT_THROW(ferry::validate_ep_config(expanded, mpi_size()), ferry::InvalidArgument);
  {
    Harness plain(shared(), rank_rows_config(DataType::kBFloat16, 64, 1024, 2, 2, true, 1));
    ASSERT_TRUE(plain.alive());
    EXPECT_THROW(plain.buf().combine_input(), ferry::InvalidArgument);
  }
  Harness h(shared(), zero_copy_config(DataType::kBFloat16, 64, 1024, 2, 2, true, 1));
  ASSERT_TRUE(h.alive());
  forget_previous_round();
  ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
  const TensorView input = h.buf().combine_input();
  EXPECT_EQ(input.dtype, DataType::kBFloat16);
  ASSERT_EQ(input.shape.size(), 2u);
  EXPECT_EQ(input.shape[0], int64_t{mpi_size()} * 64);
  EXPECT_EQ(input.shape[1], 1024);
  // The dispatch before the refused combine: the handle is fresh, the call order right.
  const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull,
                               false, 0);
  const std::vector<ep::RankInput> all = ep::make_all_inputs(s);
  const ep::RankInput& mine = all[mpi_rank()];
  h.upload(s, mine, false);
  const DispatchResult r = h.buf().dispatch(h.tokens_view(s, mine.num_tokens), h.idx_view(s, mine.num_tokens, false),
                                            h.weights_view(s, mine.num_tokens), h.scales_view(s, mine.num_tokens),
                                            h.stream());
  h.expert_out_mem().ensure(size_t(input.shape[0]) * 1024 * 2);
  const TensorView other(h.expert_out_mem().get(), DataType::kBFloat16, input.shape);
  EXPECT_THROW(h.buf().combine(other, r.handle, h.out_view(mine.num_tokens), h.stream()), ferry::InvalidArgument);
  EXPECT_THROW(h.buf().combine_send(other, r.handle, h.stream()), ferry::InvalidArgument);
  // The input's memory, but more rows than it holds.
  const TensorView longer(input.data, DataType::kBFloat16, {input.shape[0] + 1, 1024});
  EXPECT_THROW(h.buf().combine(longer, r.handle, h.out_view(mine.num_tokens), h.stream()), ferry::InvalidArgument);
  CK(cudaStreamSynchronize(h.stream()));
  forget_previous_round();
  ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried));
}

// Every token of every rank picks rank 0, one row more than its output holds: every rank's dispatch fails (NOTE
// [EP overflow is collective]); then a dispatch that fits and its zero-copy combine, rows in rank order and own
// rows first.
TEST(EpZeroCopyCombine, RecvRowsOverflowFailsOnEveryRank) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  constexpr int T = 16, H = 512, K = 2;
  for (bool own_first : {false, true}) {
    SCOPED_TRACE(own_first ? "own rows first" : "rank order");
    EpConfig cfg = zero_copy_config(DataType::kBFloat16, T, H, K, 2, true, 1, 0, own_first);
    cfg.max_recv_rows = int64_t{mpi_size()} * T - 1;
    Harness h(shared(), cfg);
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    expect_overflow_then_a_dispatch_that_fits(h, T, H, K);
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  }
}

// An out-of-range expert id on rank 0. With sync_counts its dispatch throws and nobody combines; without, the
// error surfaces in rank 0's check_errors() after a synchronization, and every rank still combines (the send half
// tells the peers where rank 0's rows are; rank 0 sums nothing): no rank hangs or faults, nothing else is
// reported, and checked rounds follow on the same buffer.
TEST(EpZeroCopyCombine, BadExpertIdOnOneRank) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const int me = mpi_rank();
  for (bool sync_counts : {true, false}) {
    SCOPED_TRACE(sync_counts ? "sync_counts" : "no sync_counts");
    Harness h(shared(), zero_copy_config(DataType::kBFloat16, 32, 1024, 4, 2, true, 1));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull,
                                 false, 0);
    const std::vector<ep::RankInput> all = ep::make_all_inputs(s);
    ep::RankInput bad = all[0];
    bad.idx[1] = h.config().num_experts;  // token 0, slot 1
    const ep::RankInput& mine = me == 0 ? bad : all[me];
    const int n = mine.num_tokens;
    std::string error;
    try {
      h.upload(s, mine, false);
      forget_previous_round();
      h.poison_previous();
      DispatchOptions opts;
      opts.sync_counts = sync_counts;
      bool threw = false;
      DispatchResult r;
      try {
        r = h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(),
                             h.stream(), opts);
        h.remember(r);
      } catch (const ferry::InvalidArgument& e) {
        threw = true;
        EXPECT_TRUE(contains_ci(user_part(e.what()), "expert")) << e.what();
      }
      CK(cudaStreamSynchronize(h.stream()));
      EXPECT_EQ(threw, me == 0 && sync_counts);
      if (!sync_counts) {
        if (me == 0) {
          const std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().check_errors(); });
          EXPECT_TRUE(contains_ci(user_part(msg), "expert")) << msg;
        }
        const TensorView input = h.buf().combine_input();
        CK(cudaMemsetAsync(const_cast<void*>(input.data), 0, size_t(input.shape[0]) * input.shape[1] * 2,
                           h.stream()));
        h.buf().combine(input, r.handle, h.out_view(n), h.stream());
        CK(cudaStreamSynchronize(h.stream()));
      }
      EXPECT_NO_THROW(h.buf().check_errors());  // reported once; the other ranks have nothing to report
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    ASSERT_TRUE(run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried));
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kFull, halves_apart()));
  }
}

}  // namespace
