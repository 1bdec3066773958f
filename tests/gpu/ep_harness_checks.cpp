// The EP test harness's read-back and checks (ep_harness.hpp): fetch, verify_dispatch, verify_combine, and the
// helpers the harness shares with them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"

namespace ferry::testing::ep_gpu {

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// e4m3 decoding table (the reference decoder, tabulated for speed).
const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = ep::fp8_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

size_t dispatch_elem(const EpConfig& c) { return c.dispatch_type == DataType::kFloat8E4M3 ? 1 : 2; }

// ---------------------------------------------------------------- what a rank read back
Received fetch(const DispatchResult& r, const EpConfig& c, int local_experts, cudaStream_t stream) {
  const int Le = local_experts;
  const size_t H = static_cast<size_t>(c.hidden), G = H / ep::kScaleGroup, es = dispatch_elem(c);
  Received rx;
  rx.counts.assign(static_cast<size_t>(Le), -1);
  rx.offsets.assign(static_cast<size_t>(Le) + 1, -1);
  if (r.expert_counts) CK(cudaMemcpyAsync(rx.counts.data(), r.expert_counts, Le * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  if (r.expert_offsets) CK(cudaMemcpyAsync(rx.offsets.data(), r.expert_offsets, (Le + 1) * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  CK(cudaStreamSynchronize(stream));
  rx.fetched.assign(static_cast<size_t>(Le), 0);
  rx.base.assign(static_cast<size_t>(Le) + 1, 0);
  for (int le = 0; le < Le; ++le) {
    const int64_t off = rx.offsets[le], n = rx.counts[le];
    if (r.tokens && off >= 0 && n > 0 && off <= r.capacity_rows) rx.fetched[le] = std::min(n, r.capacity_rows - off);
    rx.base[le + 1] = rx.base[le] + rx.fetched[le];
  }
  const size_t rows = static_cast<size_t>(rx.base[Le]);
  rx.tokens.assign(rows * H * es, 0);
  if (r.scales) rx.scales.assign(rows * G, 0.0f);
  if (r.weights) rx.weights.assign(rows, 0.0f);
  for (int le = 0; le < Le; ++le) {
    const size_t n = static_cast<size_t>(rx.fetched[le]), b = static_cast<size_t>(rx.base[le]);
    const size_t off = static_cast<size_t>(std::max<int64_t>(rx.offsets[le], 0));
    if (n == 0) continue;
    CK(cudaMemcpyAsync(rx.tokens.data() + b * H * es, static_cast<const char*>(r.tokens) + off * H * es, n * H * es,
                       cudaMemcpyDeviceToHost, stream));
    if (r.scales)
      CK(cudaMemcpyAsync(rx.scales.data() + b * G, r.scales + off * G, n * G * sizeof(float), cudaMemcpyDeviceToHost, stream));
    if (r.weights)
      CK(cudaMemcpyAsync(rx.weights.data() + b, r.weights + off, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  CK(cudaStreamSynchronize(stream));
  return rx;
}

uint64_t verify_dispatch(const DispatchResult& r, const Received& rx, const EpConfig& c, const ep::Spec& s,
                         const std::vector<ep::RankInput>& all, const DispatchExpect& ex, const std::string& what) {
  const int me = mpi_rank(), W = mpi_size(), Le = c.num_experts / W;
  const bool ht = c.mode == EpMode::kHighThroughput, fp8 = c.dispatch_type == DataType::kFloat8E4M3;
  const size_t H = static_cast<size_t>(c.hidden), G = H / ep::kScaleGroup, es = dispatch_elem(c);
  const ep::Layout ref = ep::reference_layout(s, all, me, ht ? c.expert_alignment : 0);
  size_t errors = 0;
  std::ostringstream first;
  auto bad = [&](const std::string& msg) {
    if (errors++ < 8) first << "\n  " << msg;
  };

  EXPECT_EQ(r.local_experts, Le) << what;
  EXPECT_NE(r.tokens, nullptr) << what;
  EXPECT_NE(r.expert_counts, nullptr) << what;
  EXPECT_NE(r.expert_offsets, nullptr) << what;
  EXPECT_EQ(r.scales != nullptr, fp8) << "scales are returned exactly for fp8 dispatch: " << what;
  EXPECT_EQ(r.weights != nullptr, c.with_weights) << "weights are returned exactly with_weights: " << what;
  EXPECT_NE(r.handle.generation, 0u) << what;
  EXPECT_EQ(r.handle.num_tokens, all[me].num_tokens) << what;
  EXPECT_EQ(r.handle.with_weights, c.with_weights) << what;
  if (ht) {
    EXPECT_GE(r.capacity_rows, ref.total_rows()) << what;
    if (ex.sync_counts) {
      EXPECT_EQ(r.num_rows, ref.total_rows()) << what;
      EXPECT_EQ(r.host_expert_counts, ref.counts) << what;
    } else {
      EXPECT_EQ(r.num_rows, -1) << "sync_counts=false must not report num_rows: " << what;
      EXPECT_TRUE(r.host_expert_counts.empty()) << what;
    }
  } else {
    EXPECT_EQ(r.capacity_per_expert, s.capacity()) << what;
    EXPECT_GE(r.capacity_rows, Le * s.capacity()) << what;
    EXPECT_EQ(r.num_rows, -1) << "low-latency never synchronizes: " << what;
    EXPECT_TRUE(r.host_expert_counts.empty()) << what;
  }
  for (int le = 0; le <= Le; ++le)
    if (rx.offsets[le] != ref.offsets[le])
      bad("offsets[" + std::to_string(le) + "] = " + std::to_string(rx.offsets[le]) + ", want " + std::to_string(ref.offsets[le]));
  for (int le = 0; le < Le; ++le)
    if (rx.counts[le] != ref.counts[le])
      bad("counts[" + std::to_string(le) + "] = " + std::to_string(rx.counts[le]) + ", want " + std::to_string(ref.counts[le]));

  const auto& f8 = fp8_table();
  uint64_t hash = 0xcbf29ce484222325ull;
  for (int le = 0; le < Le; ++le) {
    const int64_t n = std::min<int64_t>(rx.fetched[le], ref.counts[le]);
    for (int64_t i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(rx.base[le] + i);
      const ep::Entry& e = ref.rows[le][static_cast<size_t>(i)];
      const ep::RankInput& src = all[e.src_rank];
      const size_t t = static_cast<size_t>(e.src_token);
      auto where = [&] {
        return "expert " + std::to_string(le) + " row " + std::to_string(i) + " (from rank " + std::to_string(e.src_rank) +
               " token " + std::to_string(e.src_token) + " k " + std::to_string(e.k) + ")";
      };
      const uint8_t* got = &rx.tokens[row * H * es];
      hash = fnv1a(got, H * es, hash);
      if (c.with_weights) {
        const float want = src.weights[t * s.topk + e.k];
        if (!(rx.weights[row] == want)) bad(where() + ": weight " + std::to_string(rx.weights[row]) + ", want " + std::to_string(want));
        hash = fnv1a(&rx.weights[row], sizeof(float), hash);
      }
      if (fp8) hash = fnv1a(&rx.scales[row * G], G * sizeof(float), hash);
      if (!fp8) {
        if (std::memcmp(got, &src.x[t * H], H * 2) != 0) bad(where() + ": bf16 row differs from the source token");
      } else if (s.fp8_input) {
        if (std::memcmp(got, &src.q[t * H], H) != 0) bad(where() + ": fp8 bytes differ from the input");
        if (std::memcmp(&rx.scales[row * G], &src.scales[t * G], G * sizeof(float)) != 0)
          bad(where() + ": scales differ from the input");
      } else {
        for (size_t g = 0; g < G; ++g) {
          const float scale = rx.scales[row * G + g];
          const float want_scale = ep::expected_scale(src.amax(s, static_cast<int>(t), static_cast<int>(g)));
          if (!(std::fabs(scale - want_scale) <= 1e-6f * want_scale)) {
            bad(where() + ": group " + std::to_string(g) + " scale " + std::to_string(scale) + ", want max(amax, 1e-4)/448 = " +
                std::to_string(want_scale));
            continue;
          }
          for (size_t h = g * ep::kScaleGroup; h < (g + 1) * ep::kScaleGroup; ++h) {
            const double x = src.value(s, static_cast<int>(t), static_cast<int>(h));
            const double deq = static_cast<double>(f8[got[h]]) * scale;
            if (!(std::fabs(deq - x) <= ep::fp8_quant_bound(x, scale))) {
              bad(where() + ": column " + std::to_string(h) + " dequantizes to " + std::to_string(deq) + ", input " +
                  std::to_string(x) + " (scale " + std::to_string(scale) + ")");
              break;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(errors, 0u) << errors << " mismatches in the dispatch output: " << what << first.str();
  return hash;
}

uint64_t verify_combine(const std::vector<uint16_t>& out, const std::vector<uint8_t>& guard, const ep::CombineRef& ref,
                        int num_tokens, int hidden, const std::string& what) {
  size_t errors = 0;
  std::ostringstream first;
  const size_t H = static_cast<size_t>(hidden);
  for (size_t t = 0; t < static_cast<size_t>(num_tokens); ++t)
    for (size_t h = 0; h < H; ++h) {
      const size_t i = t * H + h;
      const float got = bf16_to_float(out[i]);
      const bool ok = ref.no_expert[t] ? got == 0.0f : std::fabs(got - ref.ref[i]) <= ref.tol[i];
      if (!ok && errors++ < 8)
        first << "\n  [" << t << ", " << h << "] got " << got << " want " << (ref.no_expert[t] ? 0.0 : ref.ref[i])
              << (ref.no_expert[t] ? " exactly (no expert)" : " +- " + std::to_string(ref.tol[i]));
    }
  size_t bad_guard = 0;
  for (uint8_t b : guard) bad_guard += b != 0xFF;
  EXPECT_EQ(errors, 0u) << errors << " of " << out.size() << " combine elements wrong: " << what << first.str();
  EXPECT_EQ(bad_guard, 0u) << "combine wrote past out[" << num_tokens << ", " << hidden << "]: " << what;
  return fnv1a(out.data(), out.size() * 2);
}

}  // namespace ferry::testing::ep_gpu
