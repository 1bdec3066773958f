// EP rounds in sequence on real GPUs (see ep_harness.hpp for what every checked
// round verifies): low-latency rounds captured in a CUDA graph and replayed with
// new routing, and long runs of back-to-back calls without host synchronization.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

// ---------------------------------------------------------------- CUDA graphs
// Low-latency rounds captured once and replayed with new routing and tokens
// written into the same input buffers before each replay:
//  A: bf16, send/recv halves, expert outputs = the dispatch output itself, so
//     out[t] = sum_k w_k x_t;
//  B: fp8 dispatch with dispatch()/combine(), expert outputs precomputed on the
//     host (at the reference rows, every other row NaN) before each replay.
TEST(Ep, LowLatencyGraphReplayWithNewRouting) {
  REQUIRE_EP();
  const int me = mpi_rank();
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "graph A (halves, identity experts)" : "graph B (fp8, precomputed experts)");
    const EpConfig cfg = variant == 0 ? make_config(EpMode::kLowLatency, DataType::kBFloat16, 64, 2048, 6, 4)
                                      : make_config(EpMode::kLowLatency, DataType::kFloat8E4M3, 48, 4096, 4, 3);
    Harness h(shared(), cfg);
    ASSERT_TRUE(h.alive());
    const int T = cfg.max_tokens_per_rank, H = cfg.hidden, Le = h.local_experts();
    const int64_t cap = static_cast<int64_t>(mpi_size()) * T;
    auto spec_for = [&](uint64_t seed) {
      return make_spec(cfg, seed, variant == 0 ? ep::Routing::kDrops : ep::Routing::kZipf, ep::TokenCounts::kFull);
    };
    h.expert_out_mem().ensure(static_cast<size_t>(Le * cap) * H * 2);
    cudaGraphExec_t exec = nullptr;
    DispatchResult captured;
    std::string error;
    try {
      const ep::Spec s0 = spec_for(shared().next_seed());
      h.upload(s0, ep::make_input(s0, me), variant == 1);
      cudaGraph_t graph = nullptr;
      CK(cudaStreamBeginCapture(h.stream(), cudaStreamCaptureModeGlobal));
      try {
        const bool i64 = variant == 1;
        if (variant == 0) {
          const EpHandle hd = h.buf().dispatch_send(h.tokens_view(s0, T), h.idx_view(s0, T, i64), h.weights_view(s0, T),
                                                    TensorView(), h.stream());
          captured = h.buf().dispatch_recv(hd, h.stream());
          h.buf().combine_send(h.expert_view(captured, captured.tokens, false), captured.handle, h.stream());
          h.buf().combine_recv(captured.handle, h.out_view(T), h.stream());
        } else {
          captured = h.buf().dispatch(h.tokens_view(s0, T), h.idx_view(s0, T, i64), h.weights_view(s0, T), TensorView(),
                                      h.stream());
          h.buf().combine(h.expert_view(captured, h.expert_out_mem().get(), false), captured.handle, h.out_view(T), h.stream());
        }
      } catch (...) {
        cudaStreamEndCapture(h.stream(), &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      CK(cudaStreamEndCapture(h.stream(), &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      CK(cudaGraphDestroy(graph));
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << "capture failed: " << error;
    bool alive = all_ranks(error.empty());
    for (int rep = 0; alive && rep < 6; ++rep) {
      SCOPED_TRACE("replay " + std::to_string(rep));
      const ep::Spec s = spec_for(shared().next_seed());
      const auto all = ep::make_all_inputs(s);
      const std::string what = describe(cfg, s) + " graph replay " + std::to_string(rep);
      std::vector<uint16_t> out;
      std::vector<uint8_t> guard;
      Received rx;
      try {
        h.upload(s, all[me], variant == 1);
        if (variant == 1) {
          // Expert outputs at the rows the contract prescribes for this routing.
          const ep::Layout ref = ep::reference_layout(s, all, me, 0);
          std::vector<uint16_t> y(static_cast<size_t>(Le * cap) * H, 0xFFFF);
          for (int le = 0; le < Le; ++le)
            for (size_t i = 0; i < ref.rows[le].size(); ++i) {
              const ep::Entry& e = ref.rows[le][i];
              const size_t row = static_cast<size_t>(le * cap) + i;
              for (int c = 0; c < H; ++c)
                y[row * H + c] = ep::stand_in(all[e.src_rank].value(s, e.src_token, c), static_cast<int64_t>(me) * Le + le);
            }
          CK(cudaMemcpyAsync(h.expert_out_mem().get(), y.data(), y.size() * 2, cudaMemcpyHostToDevice, h.stream()));
          CK(cudaStreamSynchronize(h.stream()));
        }
        h.poison_out();
        h.remember(captured);
        h.poison_previous();  // the captured dispatch output, on every rank before anyone replays
        CK(cudaGraphLaunch(exec, h.stream()));
        shared().comm->synchronize(h.stream());
        rx = fetch(captured, cfg, Le, h.stream());
        h.fetch_out(T, &out, &guard);
      } catch (const std::exception& e) {
        error = e.what();
      }
      EXPECT_TRUE(error.empty()) << error << "\n  " << what;
      alive = all_ranks(error.empty());
      if (!alive) break;
      DispatchExpect ex;
      ex.sync_counts = false;
      // The handle captured reports the capture's token count (T, as every replay).
      verify_dispatch(captured, rx, cfg, s, all, ex, what);
      const ep::ExpertKind kind = variant == 0 ? ep::ExpertKind::kIdentity : ep::ExpertKind::kStandIn;
      verify_combine(out, guard, ep::combine_reference(s, all[me], kind, h.buf().hierarchical()), T, H, what);
    }
    if (exec) cudaGraphExecDestroy(exec);
    EXPECT_TRUE(alive);
    ASSERT_TRUE(all_ranks(alive));
    // Eager calls still work on the buffer after the replays.
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  }
}

// The pattern of the Python graph test (tests/python/test_gpu_ep.py,
// test_low_latency_cuda_graph), which hung at its first replay across 2 virtual
// nodes (docs/internode.md, "Known failure"): the buffer has run eager calls
// before the capture (so the replays are calls n > 1), the capture is
// thread-local on a stream the eager calls did not use, dispatch()/combine()
// (not the halves), and the replays follow each other with no barrier between
// ranks, only each rank's own synchronization to read its results.
TEST(Ep, LowLatencyGraphAfterEagerCallsWithoutBarriers) {
  REQUIRE_EP();
  const int me = mpi_rank();
  const EpConfig cfg = make_config(EpMode::kLowLatency, DataType::kBFloat16, 64, 2048, 6, 4);
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  const int T = cfg.max_tokens_per_rank, H = cfg.hidden;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));  // eager calls
  cudaStream_t capture = nullptr;  // a stream the eager calls did not use (torch captures on its own)
  CK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  const ep::Spec s0 = make_spec(cfg, shared().next_seed(), ep::Routing::kDrops, ep::TokenCounts::kFull);
  h.upload(s0, ep::make_input(s0, me), false);
  CK(cudaStreamSynchronize(h.stream()));
  cudaGraphExec_t exec = nullptr;
  DispatchResult captured;
  std::string error;
  try {
    cudaGraph_t graph = nullptr;
    CK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    try {
      captured = h.buf().dispatch(h.tokens_view(s0, T), h.idx_view(s0, T, false), h.weights_view(s0, T), TensorView(),
                                  capture);
      h.buf().combine(h.expert_view(captured, captured.tokens, false), captured.handle, h.out_view(T),
                      capture);
    } catch (...) {
      cudaStreamEndCapture(capture, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CK(cudaStreamEndCapture(capture, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_TRUE(error.empty()) << "capture failed: " << error;
  bool alive = all_ranks(error.empty());
  // Inputs for every replay up front: the replays then need no collective at all.
  std::vector<ep::Spec> specs;
  std::vector<std::vector<ep::RankInput>> inputs;
  for (int rep = 0; rep < 4; ++rep) {
    specs.push_back(make_spec(cfg, shared().next_seed(), rep % 2 ? ep::Routing::kZipf : ep::Routing::kDrops,
                              ep::TokenCounts::kFull));
    inputs.push_back(ep::make_all_inputs(specs.back()));
  }
  for (int rep = 0; alive && rep < 4; ++rep) {
    SCOPED_TRACE("replay " + std::to_string(rep));
    const ep::Spec& s = specs[rep];
    const std::string what = describe(cfg, s) + " graph replay " + std::to_string(rep) + " after eager calls";
    std::vector<uint16_t> out;
    std::vector<uint8_t> guard;
    Received rx;
    try {
      h.upload(s, inputs[rep][me], false);
      h.poison_out();
      CK(cudaGraphLaunch(exec, h.stream()));
      // Read back at once with copies into pageable memory, as torch's .cpu()
      // does: this thread then waits inside the CUDA driver while the graph's
      // kernels still need the proxy (NOTE [Window staging], window.cpp). The
      // synchronize after them raises a device timeout.
      rx = fetch(captured, cfg, h.local_experts(), h.stream());
      h.fetch_out(T, &out, &guard);
      shared().comm->synchronize(h.stream());
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error << "\n  " << what;
    if (!error.empty()) {
      alive = false;
      break;
    }
    DispatchExpect ex;
    ex.sync_counts = false;
    verify_dispatch(captured, rx, cfg, s, inputs[rep], ex, what);
    const bool hierarchical = h.buf().hierarchical();
    verify_combine(out, guard, ep::combine_reference(s, inputs[rep][me], ep::ExpertKind::kIdentity, hierarchical), T, H,
                   what);
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaStreamDestroy(capture);
  ASSERT_TRUE(all_ranks(alive));
  ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));  // eager again
}

// ---------------------------------------------------------------- long sequences
// `calls` back-to-back dispatch+combine rounds on one stream, cycling through 4
// input sets resident on the device (different token counts and routing), the
// dispatch output fed straight back as the expert outputs; no host
// synchronization except at the checked calls (the first and every `every`-th),
// where the dispatch rows, counts and the combine output are verified.
void back_to_back(EpMode mode, int calls, int every) {
  const int me = mpi_rank();
  const EpConfig cfg = make_config(mode, DataType::kBFloat16, 32, 2048, 8, 4);
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  const int H = cfg.hidden, K = cfg.topk;
  constexpr int kSets = 4;
  std::vector<ep::Spec> specs;
  std::vector<std::vector<ep::RankInput>> inputs;
  DevMem tok[kSets], idx[kSets], w[kSets];
  const ep::Routing routings[kSets] = {ep::Routing::kDrops, ep::Routing::kUniform, ep::Routing::kZipf, ep::Routing::kOneRank};
  for (int i = 0; i < kSets; ++i) {
    specs.push_back(make_spec(cfg, shared().next_seed(), routings[i], i == 1 ? ep::TokenCounts::kSomeZero : ep::TokenCounts::kVaried,
                              false, i % mpi_size()));
    inputs.push_back(ep::make_all_inputs(specs[i]));
    const ep::RankInput& in = inputs[i][me];
    const size_t n = static_cast<size_t>(in.num_tokens);
    tok[i].ensure(n * H * 2);
    idx[i].ensure(n * K * 8);
    w[i].ensure(n * K * 4);
    if (n) {
      CK(cudaMemcpy(tok[i].get(), in.x.data(), n * H * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(idx[i].get(), in.idx.data(), n * K * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(w[i].get(), in.weights.data(), n * K * 4, cudaMemcpyHostToDevice));
    }
  }
  std::string error;
  int checked = 0;
  for (int c = 0; c < calls; ++c) {
    const int set = c % kSets;
    const ep::Spec& s = specs[set];
    const int n = inputs[set][me].num_tokens;
    const bool check = c == 0 || (c + 1) % every == 0;
    DispatchResult r;
    std::vector<uint16_t> out;
    std::vector<uint8_t> guard;
    Received rx;
    if (error.empty()) {
      try {
        if (check) h.poison_out();
        r = h.unsynced_identity_round(tok[set].get(), idx[set].get(), w[set].get(), n, c % 2 == 1);
        if (check) {
          shared().comm->synchronize(h.stream());
          rx = fetch(r, cfg, h.local_experts(), h.stream());
          h.fetch_out(n, &out, &guard);
        }
      } catch (const std::exception& e) {
        error = e.what() + std::string(" (call ") + std::to_string(c) + ")";
      }
    }
    if (!check) continue;
    if (!all_ranks(error.empty())) break;
    const std::string what = describe(cfg, s) + " call " + std::to_string(c);
    DispatchExpect ex;
    ex.sync_counts = false;
    verify_dispatch(r, rx, cfg, s, inputs[set], ex, what);
    const bool hierarchical = h.buf().hierarchical();
    verify_combine(out, guard, ep::combine_reference(s, inputs[set][me], ep::ExpertKind::kIdentity, hierarchical), n, H,
                   what);
    ++checked;
    if (!all_ranks(!::testing::Test::HasFailure())) break;  // one failing check is enough (decided together)
  }
  EXPECT_TRUE(error.empty()) << error;
  cudaStreamSynchronize(h.stream());
  EXPECT_EQ(checked, calls / every + 1) << "checked calls";
}

// NOTE [EpBuffer call order]: a dispatch may follow a dispatch directly, and
// several combines may follow one dispatch. Per mode: 5 dispatches back to back
// (different routing, token counts and tokens, no combine, no host
// synchronization: each reuses staging the one before the last used), the last
// one checked; then 3 combines of it into 3 outputs, back to back (the dispatch
// output as the expert outputs), each checked; then a checked round.
TEST(Ep, DispatchesBackToBackThenSeveralCombines) {
  REQUIRE_EP();
  const int me = mpi_rank();
  constexpr int kDispatches = 5, kCombines = 3;
  constexpr size_t kGuardBytes = 4096;
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    const EpConfig cfg = make_config(mode, DataType::kBFloat16, 48, 1024, 4, 3);
    Harness h(shared(), cfg);
    ASSERT_TRUE(h.alive());
    const int H = cfg.hidden, K = cfg.topk;
    std::vector<ep::Spec> specs;
    std::vector<std::vector<ep::RankInput>> inputs;
    DevMem tok[kDispatches], idx[kDispatches], w[kDispatches], out[kCombines];
    const ep::Routing routings[] = {ep::Routing::kZipf, ep::Routing::kUniform, ep::Routing::kDrops};
    for (int i = 0; i < kDispatches; ++i) {
      specs.push_back(make_spec(cfg, shared().next_seed(), routings[i % 3],
                                i % 2 ? ep::TokenCounts::kVaried : ep::TokenCounts::kSomeZero));
      inputs.push_back(ep::make_all_inputs(specs[i]));
      const ep::RankInput& in = inputs[i][me];
      const size_t n = static_cast<size_t>(in.num_tokens);
      tok[i].ensure(n * H * 2);
      idx[i].ensure(n * K * 8);
      w[i].ensure(n * K * 4);
      if (n) {
        CK(cudaMemcpy(tok[i].get(), in.x.data(), n * H * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(idx[i].get(), in.idx.data(), n * K * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(w[i].get(), in.weights.data(), n * K * 4, cudaMemcpyHostToDevice));
      }
    }
    const ep::Spec& s = specs.back();
    const ep::RankInput& mine = inputs.back()[me];
    const int n = mine.num_tokens;
    for (DevMem& o : out) {
      o.ensure(static_cast<size_t>(n) * H * 2 + kGuardBytes);
      CK(cudaMemset(o.get(), 0xFF, o.size()));
    }
    DispatchResult r;
    Received rx;
    std::vector<uint16_t> got[kCombines];
    std::vector<uint8_t> guard[kCombines];
    std::string error;
    try {
      DispatchOptions dopt;
      dopt.sync_counts = false;
      for (int i = 0; i < kDispatches; ++i) {
        const int m = inputs[i][me].num_tokens;
        r = h.buf().dispatch(TensorView(tok[i].get(), DataType::kBFloat16, {m, H}),
                             TensorView(idx[i].get(), DataType::kInt64, {m, K}),
                             TensorView(w[i].get(), DataType::kFloat32, {m, K}), TensorView(), h.stream(), dopt);
      }
      for (int j = 0; j < kCombines; ++j)
        h.buf().combine(h.expert_view(r, r.tokens, false), r.handle,
                        TensorView(out[j].get(), DataType::kBFloat16, {n, H}), h.stream());
      shared().comm->synchronize(h.stream());
      rx = fetch(r, cfg, h.local_experts(), h.stream());
      for (int j = 0; j < kCombines; ++j) {
        got[j].assign(static_cast<size_t>(n) * H, 0);
        guard[j].assign(kGuardBytes, 0);
        if (n) CK(cudaMemcpy(got[j].data(), out[j].get(), got[j].size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(guard[j].data(), out[j].bytes() + static_cast<size_t>(n) * H * 2, kGuardBytes,
                      cudaMemcpyDeviceToHost));
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    const std::string what = describe(cfg, s) + " last of " + std::to_string(kDispatches) + " dispatches";
    DispatchExpect ex;
    ex.sync_counts = false;
    verify_dispatch(r, rx, cfg, s, inputs.back(), ex, what);
    const ep::CombineRef ref = ep::combine_reference(s, mine, ep::ExpertKind::kIdentity, h.buf().hierarchical());
    for (int j = 0; j < kCombines; ++j)
      verify_combine(got[j], guard[j], ref, n, H, what + ", combine " + std::to_string(j));
    ASSERT_TRUE(all_ranks(!::testing::Test::HasFailure()));
    h.remember(r);
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

TEST(Ep, LowLatencyBackToBack1000) {
  REQUIRE_EP();
  back_to_back(EpMode::kLowLatency, 1000, 100);
}

TEST(Ep, HighThroughputBackToBackWithoutSync) {
  REQUIRE_EP();
  back_to_back(EpMode::kHighThroughput, 200, 50);
}

}  // namespace
