// One checked rank-rows round (ep_rank_rows_round.hpp).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
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
#include "gpu/ep_rank_rows_round.hpp"
#include "gpu/sm_hog.hpp"

namespace ferry::testing::ep_gpu {

EpConfig rank_rows_config(DataType dtype, int tokens, int hidden, int topk, int local_experts, bool weights,
                          int alignment, int num_sms, bool own_rows_first, bool zero_copy_combine) {
  EpConfig c = make_config(EpMode::kHighThroughput, dtype, tokens, hidden, topk, local_experts, weights, alignment);
  c.layout = EpLayout::kRankRows;
  c.num_sms = num_sms;
  c.own_rows_first = own_rows_first;
  c.zero_copy_combine = zero_copy_combine;
  return c;
}

RoundOptions halves_apart() {
  RoundOptions o;
  o.halves = true;
  return o;
}

namespace {

// What this rank must receive: per source, its tokens that picked an expert here, in order.
struct ExpectedRow {
  int src_rank, src_token;
};

// The caller's expert output for one received row: sum over its local experts of
// weight * bf16(value * factor(expert)), rounded to bf16 (values as received).
std::vector<uint16_t> expert_rows_output(const ep::Spec& s, const std::vector<ExpectedRow>& rows,
                                         const std::vector<ep::RankInput>& all, const std::vector<float>& received,
                                         int rank) {
  const int H = s.hidden, K = s.topk, Le = s.local_experts();
  std::vector<uint16_t> y(rows.size() * size_t(H));
  std::vector<float> acc(static_cast<size_t>(H));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fill(acc.begin(), acc.end(), 0.f);
    const ep::RankInput& in = all[rows[i].src_rank];
    for (int k = 0; k < K; ++k) {
      const int64_t e = in.expert(s, rows[i].src_token, k);
      if (e < int64_t(rank) * Le || e >= int64_t(rank + 1) * Le) continue;
      const float w = in.weight(s, rows[i].src_token, k);
      for (int h = 0; h < H; ++h) acc[h] += w * bf16_to_float(ep::stand_in(received[i * H + h], e));
    }
    for (int h = 0; h < H; ++h) y[i * H + h] = float_to_bf16(acc[h]);
  }
  return y;
}

// The reference placement: per source, its tokens that picked an expert here, in token order, sources in rank
// order; with own_rows_first this rank's every token first, then the others (NOTE [EP own rows first]).
std::vector<ExpectedRow> reference_rows(const ep::Spec& s, const std::vector<ep::RankInput>& all, int me,
                                        bool own_rows_first, std::vector<int64_t>* source_offsets) {
  const int W = int(all.size()), K = s.topk, Le = s.local_experts();
  std::vector<ExpectedRow> rows;
  source_offsets->assign(W + 1, 0);
  std::vector<int> order;
  if (own_rows_first) order.push_back(me);
  for (int sr = 0; sr < W; ++sr)
    if (!own_rows_first || sr != me) order.push_back(sr);
  for (int sr : order) {
    (*source_offsets)[sr] = int64_t(rows.size());
    for (int t = 0; t < all[sr].num_tokens; ++t) {
      bool here = own_rows_first && sr == me;
      for (int k = 0; k < K; ++k) {
        const int64_t e = all[sr].expert(s, t, k);
        here = here || (e >= int64_t(me) * Le && e < int64_t(me + 1) * Le);
      }
      if (here) rows.push_back({sr, t});
    }
  }
  (*source_offsets)[W] = int64_t(rows.size());
  return rows;
}

// Received values the host knows before the dispatch runs (bf16, fp8 input: exact).
std::vector<float> exact_received(const ep::Spec& s, const std::vector<ExpectedRow>& rows,
                                  const std::vector<ep::RankInput>& all) {
  const int H = s.hidden;
  std::vector<float> received(rows.size() * size_t(H));
  for (size_t i = 0; i < rows.size(); ++i)
    for (int hh = 0; hh < H; ++hh) received[i * H + hh] = all[rows[i].src_rank].value(s, rows[i].src_token, hh);
  return received;
}

// The previous round's result of a harness: its rank-rows outputs are poisoned
// before the next round (Harness::poison_previous does the rows and scales).
struct Previous {
  const Harness* owner = nullptr;
  DispatchResult result;
};
Previous& previous() {
  static Previous p;
  return p;
}

void poison_previous(Harness& h) {
  Previous& prev = previous();
  if (prev.owner == &h) {
    const DispatchResult& r = prev.result;
    const size_t rows = size_t(r.capacity_rows), K = size_t(r.topk);
    CK(cudaMemsetAsync(r.row_experts, 0xFF, rows * K * 4, h.stream()));
    if (r.row_weights) CK(cudaMemsetAsync(r.row_weights, 0xFF, rows * K * 4, h.stream()));
    CK(cudaMemsetAsync(r.expert_rows, 0x7F, size_t(r.index_capacity) * 4, h.stream()));
    CK(cudaMemsetAsync(r.source_offsets, 0xFF, size_t(mpi_size() + 1) * 8, h.stream()));
    CK(cudaMemsetAsync(r.expert_offsets, 0xFF, size_t(h.local_experts() + 1) * 8, h.stream()));
  }
  h.poison_previous();  // rows, scales; synchronizes, then a barrier
}

}  // namespace

void forget_previous_round() { previous() = {}; }

bool rank_rows_round(Harness& h, const ep::Spec& s, const RoundOptions& o) {
  const EpConfig& c = h.config();
  const int W = mpi_size(), me = mpi_rank(), H = c.hidden, K = c.topk, Le = h.local_experts();
  const bool fp8 = c.dispatch_type == DataType::kFloat8E4M3;
  const size_t elem = fp8 ? 1 : 2;
  const std::vector<ep::RankInput> all = ep::make_all_inputs(s);
  const ep::RankInput& mine = all[me];
  const int n = mine.num_tokens;
  const std::string what = describe(c, s) + (c.own_rows_first ? " own_rows_first" : "") +
                           (c.zero_copy_combine ? " zero_copy_combine" : "") +
                           (o.halves ? " halves" : "") + (o.graph ? " graph" : "") +
                           (o.sync_counts ? "" : " unsynced");
  SCOPED_TRACE(what);
  h.upload(s, mine, o.idx64);

  std::vector<int64_t> source_offsets;
  const std::vector<ExpectedRow> rows = reference_rows(s, all, me, c.own_rows_first, &source_offsets);
  const int64_t num_rows = int64_t(rows.size());
  const ep::Layout expanded = ep::reference_layout(s, all, me, c.expert_alignment);

  std::string error;
  DispatchResult r;
  void* expert_rows_mem = nullptr;  // where the combine's input rows go
  cudaStream_t st = h.stream();
  poison_previous(h);
  try {
    EpBuffer& buf = h.buf();
    const TensorView tokens = h.tokens_view(s, n), idx = h.idx_view(s, n, o.idx64), weights = h.weights_view(s, n),
                     scales = h.scales_view(s, n);
    DispatchOptions opts;
    opts.sync_counts = o.sync_counts && !o.graph;
    // Room for the capacity's rows (a captured combine names them all).
    h.expert_out_mem().ensure(size_t(W) * c.max_tokens_per_rank * H * 2);
    // NOTE [EP zero-copy combine]: the rows go where the buffer's peers read them.
    expert_rows_mem = c.zero_copy_combine ? const_cast<void*>(buf.combine_input().data) : h.expert_out_mem().get();
    h.poison_out();
    if (o.graph) {
      // Capture dispatch + combine of the expert outputs uploaded below (their rows
      // are known on the host from the reference), then replay.
      cudaGraph_t graph;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      r = buf.dispatch(tokens, idx, weights, scales, st, opts);
      const int64_t view_rows = c.zero_copy_combine ? std::min(r.capacity_rows, buf.combine_input().shape[0])
                                                    : r.capacity_rows;
      buf.combine(TensorView(expert_rows_mem, DataType::kBFloat16, {view_rows, H}), r.handle,
                  h.out_view(n), st);
      CK(cudaStreamEndCapture(st, &graph));
      cudaGraphExec_t exec;
      CK(cudaGraphInstantiate(&exec, graph, 0));
      // Expert outputs computed from the reference's received values (bf16/fp8 input exact; quantized: the
      // host cannot know the received bytes before the replay, so graphs are bf16 or fp8-input here).
      const std::vector<uint16_t> y = expert_rows_output(s, rows, all, exact_received(s, rows, all), me);
      if (!y.empty()) CK(cudaMemcpyAsync(expert_rows_mem, y.data(), y.size() * 2, cudaMemcpyHostToDevice, st));
      CK(cudaMemsetAsync(r.tokens, 0xFF, size_t(r.capacity_rows) * H * elem, st));
      CK(cudaGraphLaunch(exec, st));
      CK(cudaStreamSynchronize(st));
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
    } else {
      EpHandle routed;
      if (o.route_ahead) {
        routed = route_on_side_stream(buf, idx, st);
        opts.reuse = &routed;
      }
      const TensorView dispatch_idx = o.route_ahead ? TensorView() : idx;
      if (o.halves) {
        const EpHandle handle = buf.dispatch_send(tokens, dispatch_idx, weights, scales, st, opts);
        r = buf.dispatch_recv(handle, st, opts);
      } else {
        r = buf.dispatch(tokens, dispatch_idx, weights, scales, st, opts);
      }
      if (o.route_ahead) EXPECT_EQ(r.handle.generation, routed.generation);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!all_ranks(error.empty())) {
    if (!error.empty()) ADD_FAILURE() << "dispatch threw: " << error;
    return false;
  }
  h.remember(r);
  previous() = Previous{&h, r};
  EXPECT_EQ(r.topk, K);
  EXPECT_EQ(r.weights, nullptr);
  EXPECT_EQ(r.row_weights != nullptr, c.with_weights);
  if (o.sync_counts && !o.graph) {
    EXPECT_EQ(r.num_rows, num_rows);
    EXPECT_EQ(r.num_index_entries, expanded.total_rows());
    EXPECT_EQ(r.host_expert_counts.size(), size_t(Le));
    for (int le = 0; le < Le && le < int(r.host_expert_counts.size()); ++le)
      EXPECT_EQ(r.host_expert_counts[le], expanded.counts[le]) << "expert " << le;
  } else if (!o.graph) {
    EXPECT_EQ(r.num_rows, -1);
  }

  // Read back.
  CK(cudaStreamSynchronize(st));
  std::vector<int64_t> got_source(W + 1), got_offsets(Le + 1);
  std::vector<int32_t> got_counts(Le);
  CK(cudaMemcpy(got_source.data(), r.source_offsets, (W + 1) * 8, cudaMemcpyDeviceToHost));
  std::vector<int32_t> got_source_rows(W), want_source_rows(W, 0);
  CK(cudaMemcpy(got_source_rows.data(), r.source_rows, W * 4, cudaMemcpyDeviceToHost));
  for (const ExpectedRow& row : rows) ++want_source_rows[row.src_rank];
  EXPECT_EQ(got_source_rows, want_source_rows) << "source_rows";
  CK(cudaMemcpy(got_offsets.data(), r.expert_offsets, (Le + 1) * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(got_counts.data(), r.expert_counts, Le * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_source, source_offsets);
  for (int le = 0; le <= Le; ++le) EXPECT_EQ(got_offsets[le], expanded.offsets[le]) << "expert offset " << le;
  for (int le = 0; le < Le; ++le) EXPECT_EQ(got_counts[le], expanded.counts[le]) << "expert count " << le;
  if (::testing::Test::HasFailure()) return all_ranks(false);

  const int G = H / ep::kScaleGroup;
  std::vector<uint8_t> tok(size_t(num_rows) * H * elem);
  std::vector<float> sc(fp8 ? size_t(num_rows) * G : 0), rw(c.with_weights ? size_t(num_rows) * K : 0);
  std::vector<int32_t> rx(size_t(num_rows) * K), lists(size_t(expanded.total_rows()));
  if (!tok.empty()) CK(cudaMemcpy(tok.data(), r.tokens, tok.size(), cudaMemcpyDeviceToHost));
  if (!sc.empty()) CK(cudaMemcpy(sc.data(), r.scales, sc.size() * 4, cudaMemcpyDeviceToHost));
  if (!rw.empty()) CK(cudaMemcpy(rw.data(), r.row_weights, rw.size() * 4, cudaMemcpyDeviceToHost));
  if (!rx.empty()) CK(cudaMemcpy(rx.data(), r.row_experts, rx.size() * 4, cudaMemcpyDeviceToHost));
  if (!lists.empty()) CK(cudaMemcpy(lists.data(), r.expert_rows, lists.size() * 4, cudaMemcpyDeviceToHost));

  // Rows: data and routing.
  std::vector<float> received(size_t(num_rows) * H);
  std::vector<std::vector<int32_t>> want_lists(Le);
  int bad = 0;
  for (int64_t i = 0; i < num_rows && bad < 8; ++i) {
    const ep::RankInput& in = all[rows[i].src_rank];
    const int t = rows[i].src_token;
    for (int k = 0; k < K; ++k) {
      const int64_t e = in.expert(s, t, k);
      const bool here = e >= int64_t(me) * Le && e < int64_t(me + 1) * Le;
      const int want = here ? int(e - int64_t(me) * Le) : -1;
      if (rx[i * K + k] != want) {
        ADD_FAILURE() << "row " << i << " k " << k << ": expert " << rx[i * K + k] << ", want " << want;
        ++bad;
      }
      if (c.with_weights && rw[i * K + k] != (here ? in.weight(s, t, k) : 0.f)) {
        ADD_FAILURE() << "row " << i << " k " << k << ": weight " << rw[i * K + k];
        ++bad;
      }
      if (here) want_lists[want].push_back(int32_t(i));
    }
    for (int hh = 0; hh < H; ++hh) {
      const float x = in.value(s, t, hh);
      float v;
      bool ok;
      if (!fp8) {
        const uint16_t b = reinterpret_cast<const uint16_t*>(tok.data())[i * H + hh];
        v = bf16_to_float(b);
        ok = b == in.x[size_t(t) * H + hh];
      } else {
        const float scale = sc[i * G + hh / ep::kScaleGroup];
        v = ep::fp8_to_float(tok[i * H + hh]) * scale;
        if (s.fp8_input) {
          ok = tok[i * H + hh] == in.q[size_t(t) * H + hh] && scale == in.scales[size_t(t) * G + hh / ep::kScaleGroup];
        } else {
          const float want_scale = ep::expected_scale(in.amax(s, t, hh / ep::kScaleGroup));
          ok = scale == want_scale && std::fabs(double(v) - x) <= ep::fp8_quant_bound(x, want_scale);
        }
      }
      received[i * H + hh] = v;
      if (!ok) {
        ADD_FAILURE() << "row " << i << " (rank " << rows[i].src_rank << " token " << t << ") column " << hh
                      << ": got " << v << ", want " << x;
        if (++bad >= 8) break;
      }
    }
  }
  for (int le = 0; le < Le && bad < 8; ++le) {
    const int64_t at = expanded.offsets[le];
    for (size_t j = 0; j < want_lists[le].size(); ++j)
      if (lists[at + j] != want_lists[le][j]) {
        ADD_FAILURE() << "expert " << le << " list entry " << j << ": row " << lists[at + j] << ", want "
                      << want_lists[le][j];
        ++bad;
        break;
      }
    for (int64_t j = at + int64_t(want_lists[le].size()); j < expanded.offsets[le + 1]; ++j)
      if (lists[j] != -1) {
        ADD_FAILURE() << "expert " << le << " padding entry " << j << " is " << lists[j];
        ++bad;
        break;
      }
  }
  if (!all_ranks(!::testing::Test::HasFailure())) return false;

  // Combine (the graph already ran it).
  if (!o.graph) {
    const std::vector<uint16_t> y = expert_rows_output(s, rows, all, received, me);
    const int64_t rows_arg = o.sync_counts ? num_rows : r.capacity_rows;
    // Rows past the received ones are NaN: a combine reading them shows.
    CK(cudaMemsetAsync(expert_rows_mem, 0xFF, size_t(rows_arg) * H * 2, st));
    if (!y.empty()) CK(cudaMemcpyAsync(expert_rows_mem, y.data(), y.size() * 2, cudaMemcpyHostToDevice, st));
    const TensorView eo(expert_rows_mem, DataType::kBFloat16, {rows_arg, H});
    try {
      if (o.halves) {
        h.buf().combine_send(eo, r.handle, st);
        h.buf().combine_recv(r.handle, h.out_view(n), st);
      } else {
        h.buf().combine(eo, r.handle, h.out_view(n), st);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!all_ranks(error.empty())) {
      if (!error.empty()) ADD_FAILURE() << "combine threw: " << error;
      return false;
    }
  }
  std::vector<uint16_t> out;
  std::vector<uint8_t> guard;
  h.fetch_out(n, &out, &guard);
  const bool quantized = fp8 && !s.fp8_input;
  const ep::CombineRef ref =
      ep::combine_reference(s, mine, quantized ? ep::ExpertKind::kQuantized : ep::ExpertKind::kStandIn);
  verify_combine(out, guard, ref, n, H, what);
  h.verify_inputs_unchanged(s, mine, o.idx64, true, what);
  return all_ranks(!::testing::Test::HasFailure());
}

std::vector<uint16_t> exact_combine_input(const ep::Spec& s, const std::vector<ep::RankInput>& all,
                                          bool own_rows_first) {
  std::vector<int64_t> source_offsets;
  const std::vector<ExpectedRow> rows = reference_rows(s, all, mpi_rank(), own_rows_first, &source_offsets);
  return expert_rows_output(s, rows, all, exact_received(s, rows, all), mpi_rank());
}

bool run_round(Harness& h, ep::Routing routing, ep::TokenCounts counts, const RoundOptions& o, int hot) {
  const ep::Spec s = make_spec(h.config(), shared().next_seed(), routing, counts, o.fp8_input, hot);
  return rank_rows_round(h, s, o);
}

bool rounds_on_few_free_sms(Harness& h) {
  forget_previous_round();
  if (!run_round(h, ep::Routing::kZipf, ep::TokenCounts::kFull)) return false;  // buffers sized, kernels loaded
  for (int free_sms : {1, 3}) {
    SCOPED_TRACE(std::to_string(free_sms) + " free SMs");
    std::unique_ptr<SmHog> hog = hold_sms_on_every_rank(free_sms);
    if (hog == nullptr) return false;
    if (!run_round(h, ep::Routing::kZipf, ep::TokenCounts::kFull)) return false;
    if (!run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, halves_apart())) return false;
  }
  return true;
}

bool graph_and_many_tokens(RankRowsConfig config, int bf16_sms, bool last_in_graph, std::vector<int> many_sms) {
  for (bool fp8_input : {false, true}) {
    SCOPED_TRACE(fp8_input ? "graph, fp8 input" : "graph, bf16");
    Harness h(shared(), config(fp8_input ? DataType::kFloat8E4M3 : DataType::kBFloat16, 200, 8,
                               fp8_input ? 24 : bf16_sms));
    if (!h.alive()) return false;
    forget_previous_round();
    RoundOptions o;
    o.graph = true;
    o.fp8_input = fp8_input;
    for (int i = 0; i < 3; ++i)
      if (!run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, o)) return false;
    o.graph = last_in_graph;
    if (!run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o)) return false;
  }
  for (int sms : many_sms) {
    SCOPED_TRACE("many tokens, sms=" + std::to_string(sms));
    Harness h(shared(), config(DataType::kBFloat16, 1000, 1, sms));
    if (!h.alive()) return false;
    forget_previous_round();
    RoundOptions o;
    o.idx64 = true;
    if (!run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o)) return false;
    if (!run_round(h, ep::Routing::kZipf, ep::TokenCounts::kVaried, halves_apart())) return false;
  }
  return true;
}

}  // namespace ferry::testing::ep_gpu
