// ferry-bench ep --check for EpLayout::kRankRows (ep_check.hpp): what a rank
// received, one row per (token, source rank), against the regenerated inputs;
// then expert outputs for the combine check (check_combine, shared with the
// expanded layout: the same out[t]).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ep_check.hpp"
#include "ep_check_detail.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench::ep_detail {

CheckRecord check_dispatch_rank_rows(const CheckContext& c, const DispatchResult& result, void* expert_outputs) {
  CheckRecord record;
  const int K = c.options.topk, W = c.world, Le = c.local_experts;
  const size_t H = static_cast<size_t>(c.options.hidden), groups = H / kScaleBlock;
  const bool fp8 = c.type == DataType::kFloat8E4M3;
  const size_t elem = fp8 ? 1 : 2;
  const int64_t first_expert = static_cast<int64_t>(c.rank) * Le;
  auto local = [&](int64_t e) { return e >= first_expert && e < first_expert + Le; };

  // Expected rows: per source, its tokens with an expert here, in token order, sources in rank order;
  // --own-rows-first: this rank's every token first, then the others (NOTE [EP own rows first]).
  struct Source {
    int src, token;
  };
  const bool own_first = c.options.own_rows_first;
  std::vector<int> order;
  if (own_first) order.push_back(c.rank);
  for (int src = 0; src < W; ++src)
    if (!own_first || src != c.rank) order.push_back(src);
  std::vector<Source> want;
  std::vector<int64_t> want_offsets(W + 1, 0);
  for (int src : order) {
    want_offsets[static_cast<size_t>(src)] = static_cast<int64_t>(want.size());
    const Routing& r = c.in.all_routings[static_cast<size_t>(src)];
    for (int t = 0; t < c.in.tokens; ++t) {
      bool here = own_first && src == c.rank;
      for (int k = 0; k < K; ++k) here = here || local(r.idx[static_cast<size_t>(t) * K + k]);
      if (here) want.push_back({src, t});
    }
  }
  want_offsets[static_cast<size_t>(W)] = static_cast<int64_t>(want.size());
  const auto offsets = download<int64_t>(result.source_offsets, static_cast<size_t>(W) + 1);
  if (offsets != want_offsets) {
    record.fail("source offsets: " + std::to_string(offsets[W]) + " rows, expected " + std::to_string(want.size()));
    return record;
  }
  const int64_t n = static_cast<int64_t>(want.size());
  const auto rows = download<uint8_t>(result.tokens, n * H * elem);
  const auto scales = fp8 ? download<float>(result.scales, n * groups) : std::vector<float>();
  const auto experts = download<int32_t>(result.row_experts, n * K);
  const auto weights = download<float>(result.row_weights, n * K);
  const auto counts = download<int32_t>(result.expert_counts, static_cast<size_t>(Le));
  const auto expert_offsets = download<int64_t>(result.expert_offsets, static_cast<size_t>(Le) + 1);
  const auto lists = download<int32_t>(result.expert_rows, static_cast<size_t>(expert_offsets[Le]));
  std::vector<std::vector<int32_t>> want_lists(static_cast<size_t>(Le));
  std::vector<uint16_t> x(H), y(n * H);
  std::vector<float> got(H);
  for (int64_t j = 0; j < n && record.mismatches < 8; ++j) {
    const Source& s = want[static_cast<size_t>(j)];
    const Routing& r = c.in.all_routings[static_cast<size_t>(s.src)];
    const std::string where = "row " + std::to_string(j) + " (rank " + std::to_string(s.src) + " token " +
                              std::to_string(s.token) + ")";
    float factor = 0;  // the caller's weighted sum over its local experts
    for (int k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(s.token) * K + k;
      const int64_t e = r.idx[i];
      const int want_le = local(e) ? static_cast<int>(e - first_expert) : -1;
      const float want_w = want_le >= 0 ? r.weights[i] : 0.f;
      if (experts[j * K + k] != want_le || weights[j * K + k] != want_w)
        record.fail(where + " k " + std::to_string(k) + ": expert " + std::to_string(experts[j * K + k]) +
                    " weight " + std::to_string(weights[j * K + k]) + ", expected " + std::to_string(want_le) + " " +
                    std::to_string(want_w));
      if (want_le >= 0) {
        want_lists[static_cast<size_t>(want_le)].push_back(static_cast<int32_t>(j));
        factor += r.weights[i] * expert_scale(e);
      }
    }
    token_row(c.options.seed, s.src, s.token, c.options.hidden, x.data());
    if (check_row(c.type, rows.data(), scales.data(), j, H, x.data(), got.data(), record, where))
      for (size_t h = 0; h < H; ++h) y[static_cast<size_t>(j) * H + h] = bf16_bits(got[h] * factor);
  }
  for (int le = 0; le < Le; ++le) {
    const auto& w = want_lists[static_cast<size_t>(le)];
    if (counts[le] != static_cast<int32_t>(w.size())) {
      record.fail("expert " + std::to_string(le) + ": count " + std::to_string(counts[le]) + ", expected " +
                  std::to_string(w.size()));
      continue;
    }
    for (size_t j = 0; j < w.size(); ++j)
      if (lists[static_cast<size_t>(expert_offsets[le]) + j] != w[j]) {
        record.fail("expert " + std::to_string(le) + " list entry " + std::to_string(j));
        break;
      }
  }
  if (expert_outputs != nullptr && n > 0)
    FERRY_CUDA_CHECK(cudaMemcpy(expert_outputs, y.data(), y.size() * 2, cudaMemcpyHostToDevice));
  if (expert_outputs != nullptr) FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  return record;
}

}  // namespace ferry::bench::ep_detail
