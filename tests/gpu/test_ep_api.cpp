// EP buffer API on real GPUs (see ep_harness.hpp for what every checked round
// verifies): handle reuse, stale handles and bad inputs (bad expert ids:
// test_ep_bad_ids.cpp).
//
// Bad calls are made by every rank together (host validation throws before any
// communication), except an out-of-range expert id, which only rank 0 passes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <regex>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/ep_overflow_case.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

// `name` appears in the message as a whole word (so "out" is not matched by
// "expert_outputs").
bool names_word(const std::string& what, const std::string& name) {
  const std::regex re("(^|[^A-Za-z0-9_])" + name + "([^A-Za-z0-9_]|$)", std::regex::icase);
  return std::regex_search(user_part(what), re);
}

// ---------------------------------------------------------------- path
// One node: the NVLink kernels and their symmetric memory plan (what EP ran
// before it ran across nodes); ranks in several nodes (FERRY_RANKS_PER_NODE):
// the cross-node path (src/ep/internode_dispatch.cu, internode_combine.cu). Both checked rounds, both modes.
TEST(Ep, PathFollowsTheNodes) {
  REQUIRE_EP();
  const bool several_nodes = shared().comm->topology().num_nodes > 1;
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 32, 1024, 4, 2));
    ASSERT_TRUE(h.alive());
    EXPECT_EQ(h.buf().spans_nodes(), several_nodes);
    if (mpi_rank() == 0 && mode == EpMode::kHighThroughput)
      std::printf("[ferry] EP on %d node(s): %s path\n", shared().comm->topology().num_nodes,
                  h.buf().hierarchical() ? "hierarchical cross-node"
                  : h.buf().spans_nodes() ? "cross-node"
                                          : "NVLink");
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
    ASSERT_TRUE(all_ranks(h.buf().spans_nodes() == several_nodes));
    EXPECT_EQ(h.buf().hierarchical(), expect_hierarchical(*shared().comm, mode));  // FERRY_EP_HIERARCHICAL
  }
}

// ---------------------------------------------------------------- handles
// Re-dispatch with the routing of the latest handle and new tokens: the same
// placement, the new data; with topk_idx omitted and with it given.
TEST(Ep, HandleReuse) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 2048, 4, 3));
    ASSERT_TRUE(h.alive());
    const ep::Spec a = make_spec(h.config(), shared().next_seed(), ep::Routing::kDrops, ep::TokenCounts::kVaried);
    const auto all_a = ep::make_all_inputs(a);
    Harness::Outcome first;
    ASSERT_TRUE(h.round(a, all_a, {}, &first));
    // New token values, the same routing, weights and token counts.
    ep::Spec b = a;
    b.seed = shared().next_seed();
    b.counts = ep::TokenCounts::kFull;
    auto all_b = ep::make_all_inputs(b);
    for (int r = 0; r < mpi_size(); ++r) {
      all_b[r].num_tokens = all_a[r].num_tokens;
      all_b[r].idx = all_a[r].idx;
      all_b[r].weights = all_a[r].weights;
      all_b[r].x.resize(static_cast<size_t>(all_a[r].num_tokens) * b.hidden);
    }
    Harness::Options o;
    o.reuse = &first.handle;
    Harness::Outcome second;
    ASSERT_TRUE(h.round(b, all_b, o, &second));
    o.reuse = &second.handle;
    o.reuse_passes_idx = true;
    o.idx64 = true;
    Harness::Outcome third;
    ASSERT_TRUE(h.round(b, all_b, o, &third));
    EXPECT_EQ(third.dispatch_hash, second.dispatch_hash);
    EXPECT_EQ(third.out_hash, second.out_hash);
  }
}

// EpBuffer::route ahead of the dispatch (on a side stream, joined by an event):
// a fresh routing each round (-1 slots, skew, ranks with no tokens, several
// layout blocks), the dispatch and its halves reusing route's handle, checked
// like any round; plain dispatches and routed ones mixed on one buffer.
TEST(Ep, RouteAhead) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    // 1100 tokens: several layout blocks (kLayoutThreads tokens each) where the mode allows it.
    const int T = mode == EpMode::kHighThroughput ? 1100 : 128;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, 2048, 4, 3));
    ASSERT_TRUE(h.alive());
    Harness::Options ahead;
    ahead.route_ahead = true;
    Harness::Options ahead_halves = ahead;
    ahead_halves.halves = true;
    ahead_halves.idx64 = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, ahead));
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kSomeZero, ahead_halves));
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));  // a plain dispatch between
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull, ahead));
    ASSERT_TRUE(run_case(h, ep::Routing::kNone, ep::TokenCounts::kVaried, ahead));
  }
  {  // fp8 input, high throughput
    Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kFloat8E4M3, 96, 2048, 4, 3));
    ASSERT_TRUE(h.alive());
    Harness::Options ahead;
    ahead.route_ahead = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, ahead, /*fp8_input=*/true));
  }
}

// route replaces the buffer's layout: the previous dispatch's handle is stale
// (its combine is refused), route is refused between a send half and its receive
// half and with a bad topk_idx, a dispatch reusing route's handle must pass as
// many tokens; the buffer stays usable.
TEST(Ep, RouteReplacesTheLayout) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    constexpr int T = 32, H = 1024, K = 4;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, H, K, 2));
    ASSERT_TRUE(h.alive());
    std::string error;
    try {
      const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
      const auto in = ep::make_input(s, mpi_rank());
      h.upload(s, in, false);
      const int n = in.num_tokens;
      const TensorView idx = h.idx_view(s, n, false);
      const DispatchResult r =
          h.buf().dispatch(h.tokens_view(s, n), idx, h.weights_view(s, n), TensorView(), h.stream());
      const EpHandle routed = h.buf().route(idx, h.stream());
      EXPECT_NE(routed.generation, r.handle.generation);
      EXPECT_EQ(routed.num_tokens, n);
      std::string msg = error_message<ferry::InvalidArgument>(
          [&] { h.buf().combine(h.expert_view(r, r.tokens, true), r.handle, h.out_view(n), h.stream()); });
      EXPECT_TRUE(contains_ci(msg, "older")) << msg;
      msg = error_message<ferry::InvalidArgument>(
          [&] { h.buf().route(TensorView(idx.data, DataType::kInt32, {n, K - 1}), h.stream()); });
      EXPECT_TRUE(contains_ci(user_part(msg), "topk_idx")) << msg;
      msg = error_message<ferry::InvalidArgument>(
          [&] { h.buf().route(TensorView(idx.data, DataType::kFloat32, {n, K}), h.stream()); });
      EXPECT_TRUE(contains_ci(user_part(msg), "topk_idx")) << msg;
      msg = error_message<ferry::InvalidArgument>(
          [&] { h.buf().route(TensorView(idx.data, DataType::kInt32, {T + 1, K}), h.stream()); });
      EXPECT_TRUE(contains_ci(user_part(msg), "max_tokens_per_rank")) << msg;
      DispatchOptions reuse;
      reuse.reuse = &routed;
      if (n > 1) {
        msg = error_message<ferry::InvalidArgument>([&] {
          return h.buf().dispatch(TensorView(h.tokens_mem().get(), DataType::kBFloat16, {n - 1, H}), TensorView(),
                                  TensorView(h.weights_view(s, n).data, DataType::kFloat32, {n - 1, K}), TensorView(),
                                  h.stream(), reuse).num_rows;
        });
        EXPECT_TRUE(contains_ci(msg, "reused handle")) << msg;
      }
      // Between the halves: refused, then the dispatch completes.
      const EpHandle sent = h.buf().dispatch_send(h.tokens_view(s, n), TensorView(), h.weights_view(s, n), TensorView(),
                                                  h.stream(), reuse);
      EXPECT_EQ(sent.generation, routed.generation);
      msg = error_message<ferry::InvalidArgument>([&] { h.buf().route(idx, h.stream()); });
      EXPECT_TRUE(contains_ci(msg, "half done")) << msg;
      const DispatchResult again = h.buf().dispatch_recv(sent, h.stream());
      h.buf().combine(h.expert_view(again, again.tokens, true), again.handle, h.out_view(n), h.stream());
      shared().comm->synchronize(h.stream());
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    Harness::Options ahead;
    ahead.route_ahead = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, ahead));
  }
}

// A handle from an older dispatch (or none) is rejected by combine and the
// halves; the buffer stays usable.
TEST(Ep, StaleHandleIsRejected) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 32, 1024, 2, 2));
    ASSERT_TRUE(h.alive());
    Harness::Outcome old_round, new_round;
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, {}, false, 0, &old_round));
    // The second round's combine is preceded by combines with stale handles.
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kVaried);
    Harness::Options o;
    o.before_combine = [&](const DispatchResult& r, const TensorView& ev, const TensorView& out) {
      EXPECT_NE(r.handle.generation, old_round.handle.generation);
      for (const EpHandle& stale : {old_round.handle, EpHandle{}}) {
        std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine(ev, stale, out, h.stream()); });
        EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
        msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine_send(ev, stale, h.stream()); });
        EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
        // No combine_send yet: rejected either way (checked in order below).
        error_message<ferry::InvalidArgument>([&] { h.buf().combine_recv(stale, out, h.stream()); });
      }
    };
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), o, &new_round));
    // dispatch_recv with the handle of an older dispatch_send, then the right one.
    std::string error;
    try {
      const ep::Spec s2 = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
      const auto in = ep::make_input(s2, mpi_rank());
      h.upload(s2, in, false);
      const int n = in.num_tokens;
      const EpHandle latest = h.buf().dispatch_send(h.tokens_view(s2, n), h.idx_view(s2, n, false), h.weights_view(s2, n),
                                                    TensorView(), h.stream());
      std::string msg = error_message<ferry::InvalidArgument>(
          [&] { return h.buf().dispatch_recv(new_round.handle, h.stream()).num_rows; });
      EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
      const DispatchResult r = h.buf().dispatch_recv(latest, h.stream());
      // combine_recv with a stale handle after the right combine_send, then the right one.
      h.buf().combine_send(h.expert_view(r, r.tokens, true), r.handle, h.stream());
      msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine_recv(new_round.handle, h.out_view(n), h.stream()); });
      EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
      h.buf().combine_recv(r.handle, h.out_view(n), h.stream());
      shared().comm->synchronize(h.stream());
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

// ---------------------------------------------------------------- bad input
// Every rank makes the same bad call; each throws InvalidArgument naming the
// argument before any communication, and a correct round works afterwards.
TEST(Ep, BadInputsThrowAndBufferStaysUsable) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    constexpr int T = 32, H = 1024, K = 4;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, H, K, 2));
    ASSERT_TRUE(h.alive());
    const int Le = h.local_experts();
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));

    // Device inputs for up to 2 * (T + 1) rows, valid routing (expert 0) everywhere.
    DevMem tok, idx32, idx64, w, w64, big;
    tok.ensure(size_t{2} * (T + 1) * H * 2);
    idx32.ensure(size_t{2} * (T + 1) * K * 4);
    idx64.ensure(size_t{2} * (T + 1) * K * 8);
    w.ensure(size_t{2} * (T + 1) * K * 4);
    w64.ensure(size_t{2} * (T + 1) * K * 8);
    CK(cudaMemset(tok.get(), 0, tok.size()));
    CK(cudaMemset(idx32.get(), 0, idx32.size()));
    CK(cudaMemset(idx64.get(), 0, idx64.size()));
    CK(cudaMemset(w.get(), 0, w.size()));
    CK(cudaMemset(w64.get(), 0, w64.size()));
    std::vector<uint16_t> host_tokens(static_cast<size_t>(T) * H);
    std::vector<int32_t> host_idx(static_cast<size_t>(T) * K, 0);
    const int n = T;
    const TensorView good_tok(tok.get(), DataType::kBFloat16, {n, H});
    const TensorView good_idx(idx32.get(), DataType::kInt32, {n, K});
    const TensorView good_w(w.get(), DataType::kFloat32, {n, K});
    auto dispatch_throws = [&](const TensorView& t, const TensorView& i, const TensorView& wt, const TensorView& sc,
                               const std::vector<std::string>& names, const char* label) {
      SCOPED_TRACE(label);
      const std::string msg = error_message<ferry::InvalidArgument>(
          [&] { return h.buf().dispatch(t, i, wt, sc, h.stream()).num_rows; });
      bool named = names.empty();
      for (const std::string& nm : names) named = named || contains_ci(user_part(msg), nm);
      EXPECT_TRUE(named) << "message should name " << ::testing::PrintToString(names) << ": " << msg;
    };
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {T + 1, H}), TensorView(idx32.get(), DataType::kInt32, {T + 1, K}),
                    TensorView(w.get(), DataType::kFloat32, {T + 1, K}), {}, {"tokens"}, "more tokens than max_tokens_per_rank");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat32, {n, H}), good_idx, good_w, {}, {"tokens"}, "fp32 tokens");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat16, {n, H}), good_idx, good_w, {}, {"tokens"}, "fp16 tokens");
    dispatch_throws(good_tok, good_idx, TensorView(w64.get(), DataType::kFloat64, {n, K}), {}, {"weights"}, "fp64 weights");
    dispatch_throws(good_tok, TensorView(w.get(), DataType::kFloat32, {n, K}), good_w, {}, {"topk_idx"}, "fp32 topk_idx");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {n, H - 128}), good_idx, good_w, {}, {"tokens", "hidden"},
                    "hidden mismatch");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {n, K - 1}), TensorView(w.get(), DataType::kFloat32, {n, K - 1}),
                    {}, {"topk"}, "topk mismatch");
    dispatch_throws(good_tok, good_idx, TensorView(w.get(), DataType::kFloat32, {n, K + 1}), {}, {"weights"}, "weights topk mismatch");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {n - 1, K}), good_w, {}, {"topk_idx", "tokens"},
                    "topk_idx rows mismatch");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {int64_t{n} * H}), good_idx, good_w, {}, {"tokens"}, "1-D tokens");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {int64_t{n} * K}), good_w, {}, {"topk_idx"}, "1-D topk_idx");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {n, H}, {2 * H, 1}), good_idx, good_w, {}, {"tokens"},
                    "non-contiguous tokens");
    dispatch_throws(good_tok, TensorView(idx64.get(), DataType::kInt64, {n, K}, {1, n}), good_w, {}, {"topk_idx"},
                    "transposed topk_idx");
    dispatch_throws(good_tok, good_idx, TensorView(w.get(), DataType::kFloat32, {n, K}, {2 * K, 1}), {}, {"weights"},
                    "non-contiguous weights");
    dispatch_throws(TensorView(host_tokens.data(), DataType::kBFloat16, {n, H}), good_idx, good_w, {}, {"device"},
                    "host tokens");
    dispatch_throws(good_tok, TensorView(host_idx.data(), DataType::kInt32, {n, K}), good_w, {}, {"device"}, "host topk_idx");
    dispatch_throws(TensorView(), good_idx, good_w, {}, {"tokens"}, "no tokens");
    dispatch_throws(good_tok, TensorView(), good_w, {}, {"topk_idx"}, "no topk_idx (not reusing)");
    dispatch_throws(good_tok, good_idx, TensorView(), {}, {"weights"}, "weights missing with with_weights");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat8E4M3, {n, H}), good_idx, good_w,
                    TensorView(w.get(), DataType::kFloat32, {n, H / 128}), {}, "fp8 tokens with a bf16 dispatch_type");

    // Bad combines between a good dispatch and its (good) combine.
    Harness::Options o;
    o.before_combine = [&](const DispatchResult& r, const TensorView& ev, const TensorView& out) {
      auto combine_throws = [&](const TensorView& e, const TensorView& ot, const char* name, bool word, const char* label) {
        SCOPED_TRACE(label);
        const std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine(e, r.handle, ot, h.stream()); });
        EXPECT_TRUE(word ? names_word(msg, name) : contains_ci(user_part(msg), name)) << "should name " << name << ": " << msg;
      };
      const std::vector<int64_t> shape = ev.shape;
      combine_throws(TensorView(ev.data, DataType::kFloat32, shape), out, "expert_outputs", false, "fp32 expert_outputs");
      std::vector<int64_t> narrow = shape;
      narrow.back() = H - 128;
      combine_throws(TensorView(ev.data, DataType::kBFloat16, narrow), out, "expert_outputs", false, "expert_outputs hidden");
      if (mode == EpMode::kLowLatency) {
        std::vector<int64_t> fewer = shape;
        fewer[1] -= 1;
        combine_throws(TensorView(ev.data, DataType::kBFloat16, fewer), out, "expert_outputs", false, "capacity mismatch");
        combine_throws(TensorView(ev.data, DataType::kBFloat16, {Le + 1, shape[1], H}), out, "expert_outputs", false,
                       "local experts mismatch");
      } else if (r.num_rows > 0) {
        combine_throws(TensorView(ev.data, DataType::kBFloat16, {r.num_rows - 1, H}), out, "expert_outputs", false,
                       "fewer rows than dispatched");
      }
      combine_throws(TensorView(), out, "expert_outputs", false, "no expert_outputs");
      combine_throws(ev, TensorView(out.data, DataType::kFloat32, {n, H}), "out", true, "fp32 out");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n + 1, H}), "out", true, "out rows mismatch");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n, H / 2}), "out", true, "out hidden mismatch");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {int64_t{n} * H}), "out", true, "1-D out");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n, H}, {2 * H, 1}), "out", true, "non-contiguous out");
      combine_throws(ev, TensorView(host_tokens.data(), DataType::kBFloat16, {n, H}), "device", false, "host out");
    };
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), o));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

// A buffer without weights rejects them; it works without.
TEST(Ep, WeightsGivenWithoutWithWeights) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    constexpr int T = 16, H = 512, K = 2;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, H, K, 2, /*with_weights=*/false));
    ASSERT_TRUE(h.alive());
    DevMem tok, idx, w;
    tok.ensure(size_t{T} * H * 2);
    idx.ensure(size_t{T} * K * 4);
    w.ensure(size_t{T} * K * 4);
    CK(cudaMemset(tok.get(), 0, tok.size()));
    CK(cudaMemset(idx.get(), 0, idx.size()));
    CK(cudaMemset(w.get(), 0, w.size()));
    const std::string msg = error_message<ferry::InvalidArgument>([&] {
      return h.buf()
          .dispatch(TensorView(tok.get(), DataType::kBFloat16, {T, H}), TensorView(idx.get(), DataType::kInt32, {T, K}),
                    TensorView(w.get(), DataType::kFloat32, {T, K}), TensorView(), h.stream())
          .num_rows;
    });
    EXPECT_TRUE(contains_ci(user_part(msg), "weights")) << msg;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

}  // namespace

// Every token of every rank picks both experts of rank 0, whose output holds one
// row fewer than that: every rank's dispatch fails, naming rank 0 (NOTE [EP
// overflow is collective]), so no rank is left waiting in a combine. Then a
// dispatch that fits (no token picks an expert) and its combine work everywhere.
TEST(Ep, RecvRowsOverflowFailsOnEveryRank) {
  REQUIRE_EP();
  constexpr int T = 16, H = 512, K = 2;
  const int W = mpi_size();
  EpConfig cfg = make_config(EpMode::kHighThroughput, DataType::kBFloat16, T, H, K, 2);
  cfg.max_recv_rows = int64_t{W} * T * K - 1;
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  expect_overflow_then_a_dispatch_that_fits(h, T, H, K);
}
