// Bad expert ids on real GPUs: an out-of-range id on one rank, found on the
// device (fused layout), and bad ids in several layout blocks (the layout
// kernels). Only rank 0 passes them; after each, correct rounds on the same
// buffer (see ep_harness.hpp for what every checked round verifies).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

// An expert id >= num_experts on rank 0 only, detected on the device.
//  - high-throughput with sync_counts: rank 0's dispatch throws; the other ranks
//    return, having received nothing from rank 0;
//  - high-throughput without sync_counts, low-latency: the error surfaces in
//    check_errors() after a stream synchronization (once), or in rank 0's next call.
// Then every rank runs a correct round on the same buffer.
TEST(Ep, BadExpertIdOnOneRank) {
  REQUIRE_EP();
  const int me = mpi_rank();
  struct Variant {
    EpMode mode;
    bool sync_counts;
    bool next_call_raises;  // else check_errors()
    bool repeated = false;  // a token naming one expert twice instead of an id out of range
    int topk = 4;           // 12: top-k above 8 (repeated ids found at k = 3 and 9)
    DataType type = DataType::kBFloat16;  // fp8 low latency: the staged dispatch (NOTE [EP staged low latency])
  };
  for (const Variant v : {Variant{EpMode::kHighThroughput, true, false}, Variant{EpMode::kHighThroughput, false, false},
                          Variant{EpMode::kLowLatency, true, false}, Variant{EpMode::kLowLatency, true, true},
                          Variant{EpMode::kHighThroughput, true, false, true},
                          Variant{EpMode::kLowLatency, true, false, true},
                          Variant{EpMode::kHighThroughput, true, false, true, 12},
                          Variant{EpMode::kLowLatency, true, false, false, 12},
                          Variant{EpMode::kLowLatency, true, false, false, 4, DataType::kFloat8E4M3},
                          Variant{EpMode::kLowLatency, true, true, true, 4, DataType::kFloat8E4M3},
                          Variant{EpMode::kLowLatency, true, false, true, 12, DataType::kFloat8E4M3}}) {
    SCOPED_TRACE(std::string(mode_id(v.mode)) + (v.type == DataType::kBFloat16 ? " bf16" : " fp8") +
                 (v.sync_counts ? " sync" : " no-sync") +
                 (v.next_call_raises ? " next call" : " check_errors") + (v.repeated ? " repeated" : " out of range") +
                 " topk " + std::to_string(v.topk));
    Harness h(shared(), make_config(v.mode, v.type, 32, 1024, v.topk, v.topk > 8 ? 16 : 2));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
    const int E = h.config().num_experts;
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
    auto all = ep::make_all_inputs(s);
    ep::RankInput bad = all[0];
    if (v.repeated && v.topk > 8) {
      bad.idx[9] = bad.idx[3] >= 0 ? bad.idx[3] : 0;  // token 0 names one expert at k = 3 and k = 9
      bad.idx[3] = bad.idx[9];
    } else if (v.repeated) {
      bad.idx[1] = bad.idx[0] >= 0 ? bad.idx[0] : 0;  // token 0 names one expert twice
      bad.idx[0] = bad.idx[1];
    } else {
      bad.idx[1] = E;                              // token 0, slot 1
      bad.idx[bad.idx.size() - 1] = E + 1000;      // last token, last slot
    }
    const ep::RankInput& mine = me == 0 ? bad : all[me];
    const int n = mine.num_tokens;
    DispatchOptions dopt;
    dopt.sync_counts = v.sync_counts;
    std::string error;
    DispatchResult r;
    bool threw = false;
    try {
      h.upload(s, mine, false);
      h.poison_previous();
      try {
        r = h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(), h.stream(), dopt);
      } catch (const ferry::InvalidArgument& e) {
        threw = true;
        if (me == 0) {
          EXPECT_TRUE(contains_ci(user_part(e.what()), "expert")) << e.what();
        }
      }
      CK(cudaStreamSynchronize(h.stream()));
      const bool expect_throw_now = me == 0 && v.mode == EpMode::kHighThroughput && v.sync_counts;
      EXPECT_EQ(threw, expect_throw_now) << "dispatch with an out-of-range expert on rank 0";
      if (!expect_throw_now && me == 0) {
        if (v.next_call_raises) {
          const auto good = all[0];
          h.upload(s, good, false);
          error_message<ferry::InvalidArgument>([&] {
            return h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(), h.stream()).num_rows;
          });
        } else {
          const std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().check_errors(); });
          EXPECT_TRUE(contains_ci(user_part(msg), "expert")) << msg;
        }
      }
      // Reported once; the other ranks have nothing to report.
      EXPECT_NO_THROW(h.buf().check_errors());
      if (me != 0 && (v.mode == EpMode::kLowLatency || v.sync_counts)) {
        // Nothing arrived from rank 0 (low latency: its counts are zeros, or the staged receive found the bad id).
        auto without0 = all;
        without0[0] = ep::RankInput{};
        without0[0].num_tokens = 0;
        const Received rx = fetch(r, h.config(), h.local_experts(), h.stream());
        DispatchExpect ex;
        ex.sync_counts = true;
        ep::Spec s0 = s;
        verify_dispatch(r, rx, h.config(), s0, without0, ex, "peers of the rank with a bad expert id");
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kFull));
  }
}

// NOTE [EP layout scan]: with more tokens than one layout block (and than the
// fused limit, 1024), bad ids in three of rank 0's five layout blocks: the
// lowest one (token 300, slot 1, in block 1) is reported, not the first block's
// or the last one's. Then correct rounds on the same buffer.
TEST(Ep, BadExpertIdsAcrossLayoutBlocks) {
  REQUIRE_EP();
  const int me = mpi_rank();
  Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kBFloat16, 1100, 256, 4, 2));
  ASSERT_TRUE(h.alive());
  ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
  const int E = h.config().num_experts, K = h.config().topk;
  const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
  auto all = ep::make_all_inputs(s);
  ep::RankInput bad = all[0];
  ASSERT_EQ(bad.num_tokens, 1100);
  bad.idx[size_t(700) * K] = E + 7;              // block 2
  bad.idx[size_t(1099) * K + K - 1] = E + 1000;  // block 4
  bad.idx[size_t(300) * K + 1] = E;              // block 1: the lowest
  const ep::RankInput& mine = me == 0 ? bad : all[me];
  const int n = mine.num_tokens;
  std::string error;
  try {
    h.upload(s, mine, false);
    bool threw = false;
    try {
      h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(), h.stream());
    } catch (const ferry::InvalidArgument& e) {
      threw = true;
      EXPECT_TRUE(contains_ci(user_part(e.what()), "topk_idx[300][1] = " + std::to_string(E))) << e.what();
    }
    CK(cudaStreamSynchronize(h.stream()));
    EXPECT_EQ(threw, me == 0);
    EXPECT_NO_THROW(h.buf().check_errors());
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_TRUE(error.empty()) << error;
  ASSERT_TRUE(all_ranks(error.empty()));
  ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
}

}  // namespace
