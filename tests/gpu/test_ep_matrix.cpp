// EP dispatch/combine on real GPUs (see ep_harness.hpp for what every checked
// round verifies): the mode x dispatch type x shape matrix, routing shapes and
// skew, ranks and tokens without work, identical results across index types,
// APIs and expert alignments, fp8 input pass-through.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

// ---------------------------------------------------------------- the matrix
// mode x dispatch type x 8 (hidden, topk) rows, each row with its own local
// expert count, routing, token counts, index type, weights, alignment,
// sync_counts and API (whole calls or send/recv halves).
using Row = MatrixRow;
const std::vector<Row> kRows = {
    {2048, 1, 1, ep::Routing::kUniform, ep::TokenCounts::kVaried, false, true, 1, true, false},
    {4096, 2, 3, ep::Routing::kDrops, ep::TokenCounts::kFull, true, true, 128, true, false},
    {2048, 3, 4, ep::Routing::kZipf, ep::TokenCounts::kSomeZero, false, true, 128, false, false},
    {7168, 4, 8, ep::Routing::kDrops, ep::TokenCounts::kVaried, true, true, 1, true, true},
    {7168, 5, 3, ep::Routing::kZipf, ep::TokenCounts::kFull, false, true, 1, true, false},
    {4096, 6, 4, ep::Routing::kUniform, ep::TokenCounts::kVaried, true, false, 128, true, false},
    {2048, 7, 1, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, false, true, 1, false, true},
    {7168, 8, 8, ep::Routing::kZipf, ep::TokenCounts::kVaried, true, true, 128, true, false},
    // 9 scale groups: no other row's hidden leaves a partial 512-column step (the fp8 quantizer's, NOTE [EP fp8
    // wide stores]) or, in low latency, a last chunk of 128 columns.
    {1152, 6, 3, ep::Routing::kZipf, ep::TokenCounts::kVaried, true, true, 1, true, true},
};
using MatrixParam = std::tuple<EpMode, DataType, int>;  // mode, dispatch type, row

class EpMatrix : public ::testing::TestWithParam<MatrixParam> {};

// Two rounds on one buffer (different routing and token counts each time).
TEST_P(EpMatrix, DispatchCombine) {
  REQUIRE_EP();
  const auto [mode, dtype, row_index] = GetParam();
  const Row& row = kRows[static_cast<size_t>(row_index)];
  const int T = mode == EpMode::kHighThroughput ? 256 : 128;
  Harness h(shared(), make_config(mode, dtype, T, row.hidden, row.topk, row.local_experts, row.weights, row.alignment));
  ASSERT_TRUE(h.alive());
  Harness::Options o;
  o.idx64 = row.idx64;
  o.sync_counts = row.sync_counts;
  o.halves = row.halves;
  ASSERT_TRUE(run_case(h, row.routing, row.counts, o));
  const ep::Routing other = row.routing == ep::Routing::kZipf ? ep::Routing::kDrops : ep::Routing::kZipf;
  ASSERT_TRUE(run_case(h, other, ep::TokenCounts::kVaried, o));
}

INSTANTIATE_TEST_SUITE_P(Ep, EpMatrix,
                         ::testing::Combine(::testing::Values(EpMode::kHighThroughput, EpMode::kLowLatency),
                                            ::testing::Values(DataType::kBFloat16, DataType::kFloat8E4M3),
                                            ::testing::Range(0, static_cast<int>(kRows.size()))),
                         [](const auto& info) {
                           const Row& r = kRows[static_cast<size_t>(std::get<2>(info.param))];
                           return std::string(mode_id(std::get<0>(info.param))) + "_" + dtype_id(std::get<1>(info.param)) +
                                  "_h" + std::to_string(r.hidden) + "_k" + std::to_string(r.topk);
                         });

// ---------------------------------------------------------------- routing shapes
// Every token of every rank to one expert (the last rank's last one), then every
// token to all experts of one rank (that rank receives world * T * min(K, Le)
// rows: the worst case the buffer is sized for, exactly).
TEST(Ep, SkewAllTokensToOneExpertOrOneRank) {
  REQUIRE_EP();
  const int W = mpi_size();
  for (EpMode mode : kModes)
    for (int align : {1, 128}) {
      if (mode == EpMode::kLowLatency && align != 1) continue;
      SCOPED_TRACE(std::string(mode_id(mode)) + " align " + std::to_string(align));
      Harness h(shared(), make_config(mode, DataType::kBFloat16, 96, 2048, 4, 3, true, align));
      ASSERT_TRUE(h.alive());
      const int E = h.config().num_experts;
      ASSERT_TRUE(run_case(h, ep::Routing::kOneExpert, ep::TokenCounts::kFull, {}, false, E - 1));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneExpert, ep::TokenCounts::kVaried, {}, false, 0));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, false, W - 1));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, false, 0));
    }
}

// Zipf-like popularity, larger problem: top-8 of 8 experts per rank, 512 tokens.
TEST(Ep, ZipfSkew) {
  REQUIRE_EP();
  {
    Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kBFloat16, 512, 4096, 8, 8, true, 128));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
  }
  {
    Harness h(shared(), make_config(EpMode::kLowLatency, DataType::kFloat8E4M3, 128, 7168, 8, 8));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
  }
}

// The reference problem's shape (hidden 7168, top-8), 512 tokens per rank.
TEST(Ep, LargeHiddenManyTokens) {
  REQUIRE_EP();
  for (DataType dt : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
    Harness h(shared(), make_config(EpMode::kHighThroughput, dt, 512, 7168, 8, 4, true, 128));
    ASSERT_TRUE(h.alive());
    Harness::Options o;
    o.idx64 = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
  }
}

// Ranks with no tokens: all but rank 0, every other rank, every rank.
TEST(Ep, ZeroTokenRanks) {
  REQUIRE_EP();
  for (EpMode mode : kModes)
    for (DataType dt : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
      SCOPED_TRACE(std::string(mode_id(mode)) + " " + dtype_id(dt));
      Harness h(shared(), make_config(mode, dt, 64, 1024, 4, 2));
      ASSERT_TRUE(h.alive());
      for (auto counts : {ep::TokenCounts::kOnlyRank0, ep::TokenCounts::kSomeZero, ep::TokenCounts::kAllZero})
        for (bool sync : {true, false}) {
          if (mode == EpMode::kLowLatency && !sync) continue;
          Harness::Options o;
          o.sync_counts = sync;
          ASSERT_TRUE(run_case(h, ep::Routing::kUniform, counts, o));
        }
      ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));  // and back
    }
}

// Tokens whose slots are all -1 (every token, then a mix): nothing is sent for
// them and their combine output is exactly zero.
TEST(Ep, TokensWithoutExperts) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 1024, 6, 4));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kNone, ep::TokenCounts::kFull));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kFull));
    Harness::Options o;
    o.halves = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kNone, ep::TokenCounts::kVaried, o));
  }
}

// ---------------------------------------------------------------- identical results
// The same inputs with int32 and int64 topk_idx, with whole calls and with the
// send/recv halves, twice: the same rows and bitwise the same combine output.
TEST(Ep, IndexTypesAndApisGiveIdenticalResults) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 2048, 5, 3));
    ASSERT_TRUE(h.alive());
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kDrops, ep::TokenCounts::kVaried);
    const auto all = ep::make_all_inputs(s);
    std::vector<Harness::Outcome> results;
    for (int v = 0; v < 5; ++v) {
      Harness::Options o;
      o.idx64 = v % 2 == 1;
      o.halves = v >= 2 && v <= 3;
      Harness::Outcome out;
      ASSERT_TRUE(h.round(s, all, o, &out));
      results.push_back(out);
    }
    for (size_t v = 1; v < results.size(); ++v) {
      EXPECT_EQ(results[v].dispatch_hash, results[0].dispatch_hash) << "variant " << v;
      EXPECT_EQ(results[v].out_hash, results[0].out_hash) << "variant " << v;
      EXPECT_NE(results[v].handle.generation, results[v - 1].handle.generation) << "each dispatch is a new layout";
    }
  }
}

// High-throughput expert_alignment 1, 16 and 128 on the same inputs: offsets
// follow the alignment, the real rows and the combine output do not change.
TEST(Ep, ExpertAlignment) {
  REQUIRE_EP();
  std::vector<Harness::Outcome> results;
  const uint64_t seed = shared().next_seed();
  for (int align : {1, 16, 128}) {
    SCOPED_TRACE("align " + std::to_string(align));
    Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kBFloat16, 128, 1024, 4, 4, true, align));
    ASSERT_TRUE(h.alive());
    const ep::Spec s = make_spec(h.config(), seed, ep::Routing::kZipf, ep::TokenCounts::kVaried);
    Harness::Outcome out;
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), {}, &out));
    results.push_back(out);
  }
  for (size_t v = 1; v < results.size(); ++v) {
    EXPECT_EQ(results[v].dispatch_hash, results[0].dispatch_hash);
    EXPECT_EQ(results[v].out_hash, results[0].out_hash);
  }
}

// fp8 tokens with their scales travel bit-exact (high-throughput and low-latency).
TEST(Ep, Fp8InputPassThrough) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kFloat8E4M3, 96, 4096, 4, 3, true, 128));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, {}, /*fp8_input=*/true));
    Harness::Options o;
    o.sync_counts = false;
    o.idx64 = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, o, /*fp8_input=*/true));
    // bf16 input on the same buffer is quantized in the kernel.
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  }
}

}  // namespace

// Top-k above 8 (no other test goes past 8): 12 and 16 experts per token, with -1 entries, both index types,
// fused (33 tokens) and separate (1025) layouts, both modes, each round against the reference.
TEST(Ep, TopkAboveEight) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    for (int topk : {12, 16}) {
      for (int tokens : {33, 1025}) {
        SCOPED_TRACE(std::string(mode_id(mode)) + " topk=" + std::to_string(topk) + " T=" + std::to_string(tokens));
        Harness h(shared(), make_config(mode, DataType::kBFloat16, tokens, 2048, topk, 16));
        ASSERT_TRUE(h.alive());
        Harness::Options idx64;
        idx64.idx64 = true;
        ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
        ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull, idx64));
      }
    }
  }
}

// ---------------------------------------------------------------- fused and separate layout
// NOTE [EP fused layout]: a call of at most max_fused_layout_tokens(E) tokens
// (1024 here) has its layout computed inside the send kernel, a larger one by
// the layout kernels (one block per 256 tokens, then the lower blocks' totals);
// FERRY_EP_FUSE_LAYOUT=0 (read when the buffer is made) sends every call through
// the layout kernels. The same inputs through both, at 256 and 257 tokens per
// rank (one and two layout blocks), 1024 and 1025 (the fused limit), 4097 (17
// layout blocks), twice per
// buffer (the second round reuses the staging of the first, its ids as int64): each round checked
// against the reference, and bitwise the same rows and combine output
// everywhere. A bad expert id on the fused path: Ep.BadExpertIdOnOneRank (32
// tokens).
TEST(Ep, FusedAndSeparateLayoutAgree) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    for (int tokens : {256, 257, 1024, 1025, 4097}) {
      SCOPED_TRACE(std::string(mode_id(mode)) + " T=" + std::to_string(tokens));
      const EpConfig cfg = make_config(mode, DataType::kBFloat16, tokens, 2048, 6, 8);
      const ep::Spec s = make_spec(cfg, shared().next_seed(), ep::Routing::kZipf, ep::TokenCounts::kFull);
      const auto all = ep::make_all_inputs(s);
      std::vector<Harness::Outcome> results;
      for (const char* fuse : {"1", "0"}) {
        setenv("FERRY_EP_FUSE_LAYOUT", fuse, 1);
        Harness h(shared(), cfg);
        unsetenv("FERRY_EP_FUSE_LAYOUT");
        ASSERT_TRUE(h.alive());
        Harness::Outcome out;
        ASSERT_TRUE(h.round(s, all, {}, &out));
        results.push_back(out);
        Harness::Options idx64;  // the second round: the same ids as int64 (the layouts read both types)
        idx64.idx64 = true;
        ASSERT_TRUE(h.round(s, all, idx64, &out));
        EXPECT_EQ(out.dispatch_hash, results.back().dispatch_hash) << "fuse=" << fuse << ": second round";
        EXPECT_EQ(out.out_hash, results.back().out_hash) << "fuse=" << fuse << ": second round";
      }
      EXPECT_EQ(results[1].dispatch_hash, results[0].dispatch_hash);
      EXPECT_EQ(results[1].out_hash, results[0].out_hash);
    }
  }
}

// ---------------------------------------------------------------- staged and direct low latency
// NOTE [EP staged low latency]: the expanded low-latency dispatch inside a node sends its chunks through staging
// rows that alternate by epoch parity; FERRY_EP_LL_STAGED=0 (read when the buffer is made) sends them straight
// into the output rows. The same inputs through both, bf16 and fp8, 1 to 300 tokens (pair and token layouts),
// skewed routing and dropped (-1) experts, four rounds per buffer (both parities twice; int64 ids, the halves
// launched apart): every round checked against the reference, and bitwise the same rows and combine output.
TEST(Ep, StagedAndDirectLowLatencyAgree) {
  REQUIRE_EP();
  struct Case {
    int tokens;
    ep::Routing routing;
  };
  const Case cases[] = {{1, ep::Routing::kZipf}, {77, ep::Routing::kDrops}, {128, ep::Routing::kZipf},
                        {300, ep::Routing::kDrops}};
  for (DataType type : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
    for (const Case& k : cases) {
      const EpConfig cfg = make_config(EpMode::kLowLatency, type, k.tokens, 2048, 8, 8);
      const ep::Spec s = make_spec(cfg, shared().next_seed(), k.routing, ep::TokenCounts::kFull);
      SCOPED_TRACE(describe(cfg, s));
      const auto all = ep::make_all_inputs(s);
      std::vector<Harness::Outcome> results;
      for (const char* staged : {"1", "0"}) {
        setenv("FERRY_EP_LL_STAGED", staged, 1);
        Harness h(shared(), cfg);
        unsetenv("FERRY_EP_LL_STAGED");
        ASSERT_TRUE(h.alive());
        Harness::Outcome out;
        ASSERT_TRUE(h.round(s, all, {}, &out));
        results.push_back(out);
        Harness::Options idx64, halves;
        idx64.idx64 = true;
        halves.halves = true;
        for (const Harness::Options& o : {idx64, halves, Harness::Options{}}) {
          ASSERT_TRUE(h.round(s, all, o, &out));
          EXPECT_EQ(out.dispatch_hash, results.back().dispatch_hash) << "staged=" << staged << ": a later round";
          EXPECT_EQ(out.out_hash, results.back().out_hash) << "staged=" << staged << ": a later round";
        }
      }
      EXPECT_EQ(results[1].dispatch_hash, results[0].dispatch_hash) << "staged and direct rows differ";
      EXPECT_EQ(results[1].out_hash, results[0].out_hash);
    }
  }
}

// NOTE [EP staged low latency] on few SMs: with num_sms 1 or 2 the staged send grid has one block, which sends the
// routing boxes, lays the call out and then sends every chunk itself (with more, block 0 does the first two and the
// others send); 4 SMs: two send blocks. fp8 (staged by default) and bf16 (FERRY_EP_LL_STAGED=1), 77 and 300 tokens
// (pair and token layouts), skewed routing and dropped (-1) experts, three rounds per buffer (both parities, the
// halves apart once): every round checked against the reference.
TEST(Ep, StagedLowLatencyOnFewSms) {
  REQUIRE_EP();
  for (int sms : {1, 2, 4}) {
    for (DataType type : {DataType::kFloat8E4M3, DataType::kBFloat16}) {
      for (int tokens : {77, 300}) {
        EpConfig cfg = make_config(EpMode::kLowLatency, type, tokens, 2048, 8, 4);
        cfg.num_sms = sms;
        const ep::Spec s = make_spec(cfg, shared().next_seed(), tokens == 77 ? ep::Routing::kZipf : ep::Routing::kDrops,
                                     ep::TokenCounts::kVaried);
        SCOPED_TRACE("sms=" + std::to_string(sms) + " " + describe(cfg, s));
        const auto all = ep::make_all_inputs(s);
        setenv("FERRY_EP_LL_STAGED", "1", 1);
        Harness h(shared(), cfg);
        unsetenv("FERRY_EP_LL_STAGED");
        ASSERT_TRUE(h.alive());
        Harness::Options halves;
        halves.halves = true;
        for (const Harness::Options& o : {Harness::Options{}, halves, Harness::Options{}})
          ASSERT_TRUE(h.round(s, all, o));
      }
    }
  }
}

// ---------------------------------------------------------------- pair and token layouts
// NOTE [EP pair layout]: a fused layout whose send block has a thread for every (token, k) (tokens x top-k
// rounded up to a power of two <= 1024) takes one thread per pair; FERRY_EP_PAIR_LAYOUT=0 (read when the buffer
// is made) keeps one thread per token. The same inputs through both: every round checked against the reference,
// and bitwise the same rows and combine output. Top-k 3 / 5 / 8 (4 / 8 / 8 lanes a token), 1 to 128 tokens
// (pairs) and 129 at top-8 (past the limit: both take the token layout), skewed routing and dropped (-1) experts,
// ids as int32 then int64. Bad and repeated ids on the pair path: Ep.BadExpertIdOnOneRank (32 tokens).
TEST(Ep, PairAndTokenLayoutsAgree) {
  REQUIRE_EP();
  struct Case {
    int tokens, topk;
    ep::Routing routing;
  };
  const Case cases[] = {{1, 8, ep::Routing::kZipf},   {7, 3, ep::Routing::kDrops}, {33, 5, ep::Routing::kZipf},
                        {128, 8, ep::Routing::kDrops}, {128, 8, ep::Routing::kZipf}, {129, 8, ep::Routing::kZipf}};
  for (EpMode mode : kModes) {
    for (const Case& k : cases) {
      const EpConfig cfg = make_config(mode, DataType::kBFloat16, k.tokens, 2048, k.topk, 8);
      const ep::Spec s = make_spec(cfg, shared().next_seed(), k.routing, ep::TokenCounts::kFull);
      SCOPED_TRACE(std::string(mode_id(mode)) + " " + describe(cfg, s));
      const auto all = ep::make_all_inputs(s);
      std::vector<Harness::Outcome> results;
      for (const char* pairs : {"1", "0"}) {
        setenv("FERRY_EP_PAIR_LAYOUT", pairs, 1);
        Harness h(shared(), cfg);
        unsetenv("FERRY_EP_PAIR_LAYOUT");
        ASSERT_TRUE(h.alive());
        Harness::Outcome out;
        ASSERT_TRUE(h.round(s, all, {}, &out));
        results.push_back(out);
        Harness::Options idx64;
        idx64.idx64 = true;
        ASSERT_TRUE(h.round(s, all, idx64, &out));
        EXPECT_EQ(out.dispatch_hash, results.back().dispatch_hash) << "pairs=" << pairs << ": int64 ids";
        EXPECT_EQ(out.out_hash, results.back().out_hash) << "pairs=" << pairs << ": int64 ids";
      }
      EXPECT_EQ(results[1].dispatch_hash, results[0].dispatch_hash) << "pair and token layouts differ";
      EXPECT_EQ(results[1].out_hash, results[0].out_hash);
    }
  }
}

// ---------------------------------------------------------------- one-role and two-role combine
// NOTE [EP combine one role]: combine() in high throughput inside a node reduces on every SM but one, this
// rank's own tokens last and summed into `out` by the warp that reduced them; FERRY_EP_COMBINE_ONE_ROLE=0 (read
// when the buffer is made) keeps a send half and a receive half. Both on the same inputs: every round checked
// against the reference, and `out` (and the dispatched rows) bitwise the same, since the one-role sum keeps
// the receive half's roundings and rank order. Cases: skewed routing and dropped (-1) experts, ranks with no
// tokens, top-k 3 / 8, with and without weights, one chunk per token and several (FERRY_EP_CHUNK_COLS=2048 on
// 7168 columns: 4 chunks), two rounds per buffer.
TEST(Ep, CombineOneRoleAndTwoRolesAgree) {
  REQUIRE_EP();
  struct Case {
    int tokens, hidden, topk, local_experts;
    bool weights;
    ep::Routing routing;
    ep::TokenCounts counts;
    const char* chunk_cols;  // nullptr: the default
  };
  const Case cases[] = {
      {512, 7168, 8, 8, true, ep::Routing::kZipf, ep::TokenCounts::kVaried, nullptr},
      {300, 2048, 3, 4, false, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, nullptr},
      {1100, 7168, 8, 6, true, ep::Routing::kDrops, ep::TokenCounts::kFull, "2048"},
  };
  for (const Case& k : cases) {
    const EpConfig cfg =
        make_config(EpMode::kHighThroughput, DataType::kBFloat16, k.tokens, k.hidden, k.topk, k.local_experts, k.weights);
    const ep::Spec s = make_spec(cfg, shared().next_seed(), k.routing, k.counts);
    SCOPED_TRACE(describe(cfg, s) + (k.chunk_cols ? std::string(" chunk_cols=") + k.chunk_cols : std::string()));
    const auto all = ep::make_all_inputs(s);
    std::vector<Harness::Outcome> results;
    for (const char* one_role : {"1", "0"}) {
      setenv("FERRY_EP_COMBINE_ONE_ROLE", one_role, 1);
      if (k.chunk_cols) setenv("FERRY_EP_CHUNK_COLS", k.chunk_cols, 1);
      Harness h(shared(), cfg);
      unsetenv("FERRY_EP_COMBINE_ONE_ROLE");
      unsetenv("FERRY_EP_CHUNK_COLS");
      ASSERT_TRUE(h.alive());
      Harness::Outcome out;
      ASSERT_TRUE(h.round(s, all, {}, &out));
      results.push_back(out);
      ASSERT_TRUE(h.round(s, all, {}, &out));  // the second round: the ticket and the stage reused
      EXPECT_EQ(out.out_hash, results.back().out_hash) << "one_role=" << one_role << ": second round";
    }
    EXPECT_EQ(results[1].dispatch_hash, results[0].dispatch_hash);
    EXPECT_EQ(results[1].out_hash, results[0].out_hash) << "one-role and two-role out differ";
  }
}

// NOTE [EP combine chunks]: the low-latency combine inside one node may cut rows into chunks of its own
// (FERRY_EP_COMBINE_CHUNK_COLS, read when the buffer is made). A partial's sum goes element by element in the same
// order whatever the chunks, so every chunking gives bitwise the same `out`: 256 / 512 / 2048 / 3072 columns (7168 /
// 3072: a short last chunk) against the default (1024 on 2 ranks), bf16 and fp8 dispatch, 1 / 128 / 300 tokens (300:
// the dispatch's 2048-column chunks), skewed routing and dropped (-1) experts, two rounds per buffer (the halves
// apart once), each checked against the reference.
TEST(Ep, LowLatencyCombineChunksAgree) {
  REQUIRE_EP();
  for (DataType type : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
    for (int tokens : {1, 128, 300}) {
      const EpConfig cfg = make_config(EpMode::kLowLatency, type, tokens, 7168, 8, 8);
      const ep::Spec s = make_spec(cfg, shared().next_seed(), tokens == 128 ? ep::Routing::kZipf : ep::Routing::kDrops,
                                   ep::TokenCounts::kVaried);
      SCOPED_TRACE(describe(cfg, s));
      const auto all = ep::make_all_inputs(s);
      std::vector<Harness::Outcome> results;
      for (const char* cols : {static_cast<const char*>(nullptr), "256", "512", "2048", "3072"}) {
        if (cols) setenv("FERRY_EP_COMBINE_CHUNK_COLS", cols, 1);
        Harness h(shared(), cfg);
        unsetenv("FERRY_EP_COMBINE_CHUNK_COLS");
        ASSERT_TRUE(h.alive());
        Harness::Outcome out;
        ASSERT_TRUE(h.round(s, all, {}, &out));
        Harness::Options halves;
        halves.halves = true;
        Harness::Outcome again;
        ASSERT_TRUE(h.round(s, all, halves, &again));
        EXPECT_EQ(again.out_hash, out.out_hash) << "combine chunk columns " << (cols ? cols : "default") << ": halves";
        if (!results.empty())
          EXPECT_EQ(out.out_hash, results[0].out_hash) << "combine chunk columns " << cols << " against the default";
        results.push_back(out);
      }
    }
  }
}
