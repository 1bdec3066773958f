// ferry-bench ep: a case's inputs, reproducible on every rank (routing, tokens, who
// sends what to whom), and the --check verification of dispatch and combine.
#include "ep_check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ep_check_detail.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench::ep_detail {

// ------------------------------------------------------------------ numbers

namespace {

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Independent streams, one per (purpose, rank, token): any rank can regenerate any
// other rank's inputs, which is what --check needs.
uint64_t stream_seed(uint64_t seed, uint64_t purpose, uint64_t rank, uint64_t token) {
  return mix64(mix64(mix64(seed ^ (purpose * 0x9e3779b97f4a7c15ULL)) + rank) + token);
}
enum : uint64_t { kPopularityStream = 1, kRoutingStream = 2, kTokenStream = 3 };

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)

 private:
  uint64_t state_;
};

}  // namespace

// The pieces ep_check_rank_rows.cpp shares (ep_check_detail.hpp).
uint16_t bf16_bits(float value) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(value)).x; }
float bf16_value(uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
namespace {
uint8_t fp8_bits(float value) { return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3); }
}  // namespace
float fp8_value(uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

// Token t of rank `src`: multiples of 1/64 in [-1.98, 1.98], exact in bf16.
void token_row(uint64_t seed, int src, int t, int hidden, uint16_t* row) {
  Rng rng(stream_seed(seed, kTokenStream, static_cast<uint64_t>(src), static_cast<uint64_t>(t)));
  for (int h = 0; h < hidden; ++h) {
    row[h] = bf16_bits(static_cast<float>(static_cast<int>(rng.next() % 255) - 127) / 64.0f);
  }
}

// Largest |x| of the 128 bf16 values of one fp8 scale block.
float block_amax(const uint16_t* block) {
  float amax = 0;
  for (int i = 0; i < kScaleBlock; ++i) amax = std::max(amax, std::fabs(bf16_value(block[i])));
  return amax;
}

bool check_row(DataType type, const uint8_t* rows, const float* scales, int64_t j, size_t hidden, const uint16_t* x,
               float* got, CheckRecord& record, const std::string& where) {
  const bool fp8 = type == DataType::kFloat8E4M3;
  const size_t groups = hidden / kScaleBlock;
  for (size_t g = 0; g < groups; ++g) {
    const float amax = block_amax(&x[g * kScaleBlock]);
    for (size_t h = g * kScaleBlock; h < (g + 1) * kScaleBlock; ++h) {
      const size_t i = static_cast<size_t>(j) * hidden + h;
      bool ok;
      if (fp8) {
        got[h] = fp8_value(rows[i]) * scales[static_cast<size_t>(j) * groups + g];
        ok = std::fabs(got[h] - bf16_value(x[h])) <= fp8_tolerance(bf16_value(x[h]), amax);
      } else {
        uint16_t bits;
        std::memcpy(&bits, &rows[i * 2], 2);
        got[h] = bf16_value(bits);
        ok = bits == x[h];
      }
      if (!ok) {
        record.fail(where + " column " + std::to_string(h) + ": got " + std::to_string(got[h]) + ", expected " +
                    std::to_string(bf16_value(x[h])));
        return false;
      }
    }
  }
  return true;
}

size_t bytes_per_token(DataType type, int hidden) {  // payload on the wire, fp8 scales included
  const size_t h = static_cast<size_t>(hidden);
  return type == DataType::kFloat8E4M3 ? h + h / kScaleBlock * sizeof(float) : h * 2;
}

// ------------------------------------------------------------------ routing

Router::Router(int experts, int topk, double skew, uint64_t seed)
    : experts_(experts), topk_(topk), seed_(seed), inverse_weight_(static_cast<size_t>(experts), 1.0) {
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(stream_seed(seed, kPopularityStream, 0, 0));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
  for (size_t p = 0; p < order.size(); ++p) {
    inverse_weight_[static_cast<size_t>(order[p])] = std::pow(static_cast<double>(p + 1), skew);
  }
}

Routing Router::route(int rank, int tokens) const {
  Routing r;
  r.idx.resize(static_cast<size_t>(tokens) * topk_);
  r.weights.resize(r.idx.size());
  std::vector<double> key(static_cast<size_t>(experts_));
  std::vector<int> order(static_cast<size_t>(experts_));
  for (int t = 0; t < tokens; ++t) {
    Rng rng(stream_seed(seed_, kRoutingStream, static_cast<uint64_t>(rank), static_cast<uint64_t>(t)));
    for (size_t e = 0; e < key.size(); ++e) key[e] = std::log(rng.uniform()) * inverse_weight_[e];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk_, order.end(),
                      [&](int a, int b) { return key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)]; });
    for (int k = 0; k < topk_; ++k) {
      const size_t i = static_cast<size_t>(t) * topk_ + static_cast<size_t>(k);
      r.idx[i] = order[static_cast<size_t>(k)];
      r.weights[i] = static_cast<float>(0.05 + 0.95 * rng.uniform());
    }
  }
  return r;
}

namespace {

Traffic exchange_traffic(Bootstrap& bootstrap, const Routing& mine, int topk, int local_experts) {
  const int world = bootstrap.size();
  std::vector<int64_t> counts(2 * static_cast<size_t>(world), 0);  // tokens to each dst, then rows
  std::vector<char> seen(static_cast<size_t>(world));
  for (size_t t = 0; t * topk < mine.idx.size(); ++t) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int k = 0; k < topk; ++k) {
      const int64_t e = mine.idx[t * topk + static_cast<size_t>(k)];
      if (e < 0) continue;
      const size_t dst = static_cast<size_t>(e / local_experts);
      ++counts[static_cast<size_t>(world) + dst];
      if (!seen[dst]) {  // a token crosses to a rank once, however many of its experts are there
        seen[dst] = 1;
        ++counts[dst];
      }
    }
  }
  std::vector<int64_t> all(counts.size() * static_cast<size_t>(world));
  bootstrap.all_gather(counts.data(), all.data(), counts.size() * sizeof(int64_t));
  Traffic traffic;
  traffic.world = world;
  for (int src = 0; src < world; ++src) {
    const int64_t* row = all.data() + counts.size() * static_cast<size_t>(src);
    traffic.tokens.insert(traffic.tokens.end(), row, row + world);
    traffic.rows.insert(traffic.rows.end(), row + world, row + 2 * world);
  }
  return traffic;
}

}  // namespace

// ------------------------------------------------------------------ inputs

namespace {

void upload(DeviceBuffer& buffer, const void* host, size_t bytes) {
  FERRY_CUDA_CHECK(cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice));
}

}  // namespace

void make_inputs(CaseInputs& in, const Options& options, const Router& router, Bootstrap& bootstrap,
                 int local_experts) {
  const int rank = bootstrap.rank();
  const size_t T = static_cast<size_t>(in.tokens);
  const size_t H = static_cast<size_t>(options.hidden);
  const size_t groups = H / kScaleBlock;
  in.routing = router.route(rank, in.tokens);
  in.traffic = exchange_traffic(bootstrap, in.routing, options.topk, local_experts);
  if (options.check) {
    for (int src = 0; src < bootstrap.size(); ++src) {
      in.all_routings.push_back(src == rank ? in.routing : router.route(src, in.tokens));
    }
  }

  std::vector<uint16_t> x(T * H);
  for (size_t t = 0; t < T; ++t) token_row(options.seed, rank, static_cast<int>(t), options.hidden, &x[t * H]);
  in.x_bf16.emplace(x.size() * 2);
  upload(*in.x_bf16, x.data(), x.size() * 2);

  // fp8 e4m3 with one scale per 128 columns: scale = amax / 448 (the largest e4m3 value).
  std::vector<uint8_t> q(T * H);
  std::vector<float> scales(T * groups);
  for (size_t t = 0; t < T; ++t) {
    for (size_t g = 0; g < groups; ++g) {
      const size_t at = t * H + g * kScaleBlock;
      const float amax = block_amax(&x[at]);
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      scales[t * groups + g] = scale;
      for (size_t i = 0; i < kScaleBlock; ++i) q[at + i] = fp8_bits(bf16_value(x[at + i]) / scale);
    }
  }
  in.x_fp8.emplace(q.size());
  upload(*in.x_fp8, q.data(), q.size());
  in.x_scales.emplace(scales.size() * sizeof(float));
  upload(*in.x_scales, scales.data(), scales.size() * sizeof(float));
  in.topk_idx.emplace(in.routing.idx.size() * sizeof(int64_t));
  upload(*in.topk_idx, in.routing.idx.data(), in.routing.idx.size() * sizeof(int64_t));
  in.topk_weights.emplace(in.routing.weights.size() * sizeof(float));
  upload(*in.topk_weights, in.routing.weights.data(), in.routing.weights.size() * sizeof(float));
  // A copy from pageable memory may return before its DMA lands, and the bench's
  // stream does not wait for the legacy stream: finish here.
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
}

// ------------------------------------------------------------------ --check

CheckRecord check_dispatch(const CheckContext& c, const DispatchResult& result, void* expert_outputs) {
  CheckRecord record;
  const int K = c.options.topk;
  const size_t H = static_cast<size_t>(c.options.hidden);
  const size_t groups = H / kScaleBlock;
  const bool fp8 = c.type == DataType::kFloat8E4M3;
  const size_t elem = fp8 ? 1 : 2;
  const int64_t first_expert = static_cast<int64_t>(c.rank) * c.local_experts;

  struct Source {
    int src;
    int token;
    int k;
  };
  std::vector<std::vector<Source>> expected(static_cast<size_t>(c.local_experts));
  for (int src = 0; src < c.world; ++src) {
    const Routing& r = c.in.all_routings[static_cast<size_t>(src)];
    for (int t = 0; t < c.in.tokens; ++t) {
      for (int k = 0; k < K; ++k) {
        const int64_t e = r.idx[static_cast<size_t>(t) * K + static_cast<size_t>(k)];
        if (e >= first_expert && e < first_expert + c.local_experts) {
          expected[static_cast<size_t>(e - first_expert)].push_back({src, t, k});
        }
      }
    }
  }

  const auto counts = download<int32_t>(result.expert_counts, static_cast<size_t>(c.local_experts));
  std::vector<int64_t> offsets;
  if (result.expert_offsets != nullptr) {
    offsets = download<int64_t>(result.expert_offsets, static_cast<size_t>(c.local_experts) + 1);
  } else {
    for (int le = 0; le <= c.local_experts; ++le) offsets.push_back(le * result.capacity_per_expert);
  }

  std::vector<uint16_t> x(H);
  std::vector<uint16_t> y;
  std::vector<float> got(H);
  for (int le = 0; le < c.local_experts; ++le) {
    const int64_t e = first_expert + le;
    const auto& want = expected[static_cast<size_t>(le)];
    const int64_t n = counts[static_cast<size_t>(le)];
    if (n != static_cast<int64_t>(want.size())) {
      record.fail("expert " + std::to_string(e) + ": " + std::to_string(n) + " rows, expected " +
                  std::to_string(want.size()));
      continue;
    }
    const int64_t offset = offsets[static_cast<size_t>(le)];
    if (offset < 0 || offset + n > result.capacity_rows) {
      record.fail("expert " + std::to_string(e) + ": rows [" + std::to_string(offset) + ", " +
                  std::to_string(offset + n) + ") outside the " + std::to_string(result.capacity_rows) + "-row output");
      continue;
    }
    const auto rows = download<uint8_t>(static_cast<const uint8_t*>(result.tokens) + offset * H * elem, n * H * elem);
    const auto scales = fp8 ? download<float>(result.scales + offset * groups, n * groups) : std::vector<float>();
    const auto weights = result.weights != nullptr ? download<float>(result.weights + offset, n) : std::vector<float>();
    y.assign(n * H, 0);
    for (int64_t j = 0; j < n; ++j) {
      const Source& s = want[static_cast<size_t>(j)];
      const std::string where = "expert " + std::to_string(e) + " row " + std::to_string(j) + " (rank " +
                                std::to_string(s.src) + " token " + std::to_string(s.token) + ")";
      token_row(c.options.seed, s.src, s.token, c.options.hidden, x.data());
      const bool row_ok = check_row(c.type, rows.data(), scales.data(), j, H, x.data(), got.data(), record, where);
      if (row_ok)
        for (size_t h = 0; h < H; ++h) y[static_cast<size_t>(j) * H + h] = bf16_bits(got[h] * expert_scale(e));
      const float w = c.in.all_routings[static_cast<size_t>(s.src)]
                          .weights[static_cast<size_t>(s.token) * K + static_cast<size_t>(s.k)];
      if (row_ok && !weights.empty() && weights[static_cast<size_t>(j)] != w) {
        record.fail(where + ": weight " + std::to_string(weights[static_cast<size_t>(j)]) + ", expected " +
                    std::to_string(w));
      }
    }
    if (expert_outputs != nullptr && n > 0) {
      FERRY_CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(expert_outputs) + offset * H, y.data(), y.size() * 2,
                                  cudaMemcpyHostToDevice));
    }
  }
  if (expert_outputs != nullptr) FERRY_CUDA_CHECK(cudaDeviceSynchronize());  // see make_inputs
  return record;
}

CheckRecord check_combine(const CheckContext& c, const void* out) {
  CheckRecord record;
  const int K = c.options.topk;
  const size_t H = static_cast<size_t>(c.options.hidden);
  const auto got = download<uint16_t>(out, static_cast<size_t>(c.in.tokens) * H);
  std::vector<uint16_t> x(H);
  for (int t = 0; t < c.in.tokens; ++t) {
    float factor = 0;  // sum_k w * scale: every weight is positive
    for (int k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(t) * K + static_cast<size_t>(k);
      if (c.in.routing.idx[i] >= 0) factor += c.in.routing.weights[i] * expert_scale(c.in.routing.idx[i]);
    }
    token_row(c.options.seed, c.rank, t, c.options.hidden, x.data());
    for (size_t g = 0; g < H / kScaleBlock; ++g) {
      const float amax = block_amax(&x[g * kScaleBlock]);
      for (size_t h = g * kScaleBlock; h < (g + 1) * kScaleBlock; ++h) {
        const float xv = bf16_value(x[h]);
        const float ref = factor * xv;
        float tolerance = 1e-2f * std::fabs(ref) + 1e-3f;
        if (c.type == DataType::kFloat8E4M3) tolerance += factor * fp8_tolerance(xv, amax);
        const float value = bf16_value(got[static_cast<size_t>(t) * H + h]);
        if (!(std::fabs(value - ref) <= tolerance)) {  // NaN (the poison) fails
          record.fail("out[" + std::to_string(t) + "][" + std::to_string(h) + "] = " + std::to_string(value) +
                      ", expected " + std::to_string(ref));
        }
      }
    }
  }
  return record;
}

bool report_check(Bootstrap& bootstrap, const CheckRecord& mine, const std::string& case_name, const char* stage) {
  const std::vector<CheckRecord> all = bootstrap.all_gather_value(mine);
  bool ok = true;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].mismatches == 0) continue;
    ok = false;
    if (bootstrap.rank() == 0) {
      std::printf("CHECK FAILED %s (%s): rank %zu: %lld mismatches, first: %s\n", case_name.c_str(), stage, r,
                  static_cast<long long>(all[r].mismatches), all[r].first);
    }
  }
  return ok;
}

}  // namespace ferry::bench::ep_detail
