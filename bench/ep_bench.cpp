// ferry-bench ep: EP dispatch and combine in both modes (high-throughput: prefill
// sizes; low-latency: decode sizes) against an NCCL send/recv all-to-all that moves
// the same payload, in the same run, on the same stream (DESIGN.md, "How
// performance is reported").
//
// Bandwidth follows DeepEP's convention so the numbers compare: the token payload a
// rank receives (its own tokens included; a token counted once per destination
// rank, however many of its experts live there) over the time. "NVL" leaves out the
// tokens a rank sends to itself. Combine moves the same tokens back, in bf16.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace ferry::bench {
namespace {

constexpr int kScaleBlock = 128;  // fp8: one fp32 scale per 128 columns
constexpr int kDefaultHtTokens = 4096;
constexpr int kDefaultLlTokens = 128;
constexpr int kDefaultHtSms = 24;
constexpr int kDefaultLlSms = 0;  // all

struct Options {
  std::vector<EpMode> modes{EpMode::kHighThroughput, EpMode::kLowLatency};
  std::vector<int> tokens;  // empty: 4096 (ht), 128 (ll)
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
  std::vector<int> sms;     // empty: 24 (ht), 0 = all (ll)
  std::vector<DataType> dispatch_types{DataType::kBFloat16, DataType::kFloat8E4M3};
  double skew = 0;          // 0: uniform; > 0: P(expert) ~ 1 / (popularity rank + 1)^skew
  uint64_t seed = 1;
  int iters = 0;            // 0: automatic
  int warmup = 20;
  int graph_iters = 10;
  bool use_graph = true;
  std::string csv_path = "ferry_ep.csv";
  bool use_nccl = true;
  bool check = false;
  bool halves = false;  // also time the four halves one after another
};

const char* mode_label(EpMode mode) { return mode == EpMode::kHighThroughput ? "ht" : "ll"; }
const char* type_label(DataType type) { return type == DataType::kFloat8E4M3 ? "fp8" : "bf16"; }

std::vector<int> parse_int_list(const std::string& option, const std::string& text, bool allow_zero) {
  std::vector<int> values;
  for (const std::string& item : split_list(text)) {
    values.push_back(allow_zero ? parse_nonnegative_int(option, item) : parse_positive_int(option, item));
  }
  if (values.empty()) throw UsageError("option " + option + " needs at least one value");
  return values;
}

Options parse_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options options;
  if (auto v = parser.take_value("--mode")) {
    if (*v == "ht") options.modes = {EpMode::kHighThroughput};
    else if (*v == "ll") options.modes = {EpMode::kLowLatency};
    else if (*v != "both") throw UsageError("--mode must be ht, ll or both, got '" + *v + "'");
  }
  if (auto v = parser.take_value("--tokens")) options.tokens = parse_int_list("--tokens", *v, false);
  if (auto v = parser.take_value("--hidden")) options.hidden = parse_positive_int("--hidden", *v);
  if (auto v = parser.take_value("--topk")) options.topk = parse_positive_int("--topk", *v);
  if (auto v = parser.take_value("--experts")) options.experts = parse_positive_int("--experts", *v);
  if (auto v = parser.take_value("--sms")) options.sms = parse_int_list("--sms", *v, true);
  if (auto v = parser.take_value("--dispatch-types")) {
    options.dispatch_types.clear();
    for (const std::string& item : split_list(*v)) {
      if (item == "bf16") options.dispatch_types.push_back(DataType::kBFloat16);
      else if (item == "fp8") options.dispatch_types.push_back(DataType::kFloat8E4M3);
      else throw UsageError("unknown dispatch type '" + item + "' (expected bf16, fp8)");
    }
    if (options.dispatch_types.empty()) throw UsageError("--dispatch-types needs at least one type");
  }
  if (auto v = parser.take_value("--skew")) options.skew = parse_nonnegative_double("--skew", *v);
  if (auto v = parser.take_value("--seed")) options.seed = static_cast<uint64_t>(parse_nonnegative_int("--seed", *v));
  if (auto v = parser.take_value("--iters")) options.iters = parse_positive_int("--iters", *v);
  if (auto v = parser.take_value("--warmup")) options.warmup = parse_nonnegative_int("--warmup", *v);
  if (auto v = parser.take_value("--graph-iters")) options.graph_iters = parse_positive_int("--graph-iters", *v);
  if (auto v = parser.take_value("--csv")) options.csv_path = *v;
  options.use_graph = !parser.take_flag("--no-graph");
  options.use_nccl = !parser.take_flag("--no-nccl");
  options.check = parser.take_flag("--check");
  options.halves = parser.take_flag("--halves");
  parser.finish();

  if (options.hidden % kScaleBlock != 0) {
    throw UsageError("--hidden " + std::to_string(options.hidden) +
                     " must be a multiple of 128 (fp8 scales cover 128 columns)");
  }
  if (options.topk > options.experts) {
    throw UsageError("--topk " + std::to_string(options.topk) + " is larger than --experts " +
                     std::to_string(options.experts) + " (a token picks distinct experts)");
  }
  return options;
}

// ------------------------------------------------------------------ numbers

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

uint16_t bf16_bits(float value) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(value)).x; }
float bf16_value(uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
uint8_t fp8_bits(float value) { return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3); }
float fp8_value(uint8_t bits) {
  __nv_fp8_e4m3 v;
  v.__x = bits;
  return static_cast<float>(v);
}

size_t bytes_per_token(DataType type, int hidden) {  // payload on the wire, fp8 scales included
  const size_t h = static_cast<size_t>(hidden);
  return type == DataType::kFloat8E4M3 ? h + h / kScaleBlock * sizeof(float) : h * 2;
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

// ------------------------------------------------------------------ routing

struct Routing {
  std::vector<int64_t> idx;    // [T, K] expert ids, distinct per token
  std::vector<float> weights;  // [T, K] in [0.05, 1)
};

// Each token picks K distinct experts. Uniform when skew is 0; otherwise expert e
// has weight 1 / (p(e) + 1)^skew, where p is a popularity order (a random
// permutation, the same on every rank, so hot experts spread over the ranks), and
// K are drawn without replacement (Efraimidis-Spirakis: the K largest
// log(u) / weight). Reproducible from (seed, rank).
class Router {
 public:
  Router(int experts, int topk, double skew, uint64_t seed)
      : experts_(experts), topk_(topk), seed_(seed), inverse_weight_(static_cast<size_t>(experts), 1.0) {
    std::vector<int> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    Rng rng(stream_seed(seed, kPopularityStream, 0, 0));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
    for (size_t p = 0; p < order.size(); ++p) {
      inverse_weight_[static_cast<size_t>(order[p])] = std::pow(static_cast<double>(p + 1), skew);
    }
  }

  Routing route(int rank, int tokens) const {
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

 private:
  int experts_;
  int topk_;
  uint64_t seed_;
  std::vector<double> inverse_weight_;
};

// Who sends what to whom, from every rank's routing (counts all-gathered).
struct Traffic {
  int world = 1;
  std::vector<int64_t> tokens;  // [src * world + dst]: tokens of src with >= 1 expert on dst
  std::vector<int64_t> rows;    // [src * world + dst]: (token, expert) pairs of src on dst

  int64_t at(const std::vector<int64_t>& m, int src, int dst) const {
    return m[static_cast<size_t>(src) * world + static_cast<size_t>(dst)];
  }
  int64_t received(const std::vector<int64_t>& m, int dst, bool include_self) const {
    int64_t sum = 0;
    for (int src = 0; src < world; ++src) {
      if (include_self || src != dst) sum += at(m, src, dst);
    }
    return sum;
  }
  int64_t max_received(const std::vector<int64_t>& m, bool include_self) const {
    int64_t best = 0;
    for (int dst = 0; dst < world; ++dst) best = std::max(best, received(m, dst, include_self));
    return best;
  }
  int64_t max_recv_tokens() const { return max_received(tokens, true); }
  int64_t max_nvlink_tokens() const { return max_received(tokens, false); }
  int64_t max_recv_rows() const { return max_received(rows, true); }
};

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

// ------------------------------------------------------------------ inputs

// One (mode, token count): routing and device inputs, shared by every dispatch type
// and SM count.
struct CaseInputs {
  int tokens = 0;
  Routing routing;
  Traffic traffic;
  std::vector<Routing> all_routings;  // --check: every rank's routing, by rank
  std::optional<DeviceBuffer> x_bf16;    // [T, H]
  std::optional<DeviceBuffer> x_fp8;     // [T, H] e4m3, quantized on the host (high-throughput fp8 input)
  std::optional<DeviceBuffer> x_scales;  // [T, H / 128] fp32
  std::optional<DeviceBuffer> topk_idx;  // [T, K] int64
  std::optional<DeviceBuffer> topk_weights;  // [T, K] fp32
};

void upload(DeviceBuffer& buffer, const void* host, size_t bytes) {
  FERRY_CUDA_CHECK(cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice));
}

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

// Stand-in expert: expert e multiplies its rows by 2^(e % 4 - 1), exact in bf16, and
// different for neighbouring experts so a row combined under the wrong expert shows.
float expert_scale(int64_t e) { return std::ldexp(1.0f, static_cast<int>(e % 4) - 1); }

// fp8 error allowed per element: half an e4m3 step (2^-4 relative) with margin, and
// the subnormal step of the block's scale.
float fp8_tolerance(float x, float block_amax) { return std::fabs(x) / 8 + block_amax * 0x1.0p-16f + 1e-6f; }

struct CheckRecord {
  int64_t mismatches = 0;
  char first[200] = {};
  void fail(const std::string& what) {
    if (mismatches++ == 0) std::snprintf(first, sizeof(first), "%s", what.c_str());
  }
};

struct CheckContext {
  const Options& options;
  const CaseInputs& in;
  int rank;
  int world;
  int local_experts;
  EpMode mode;
  DataType type;
};

template <typename T>
std::vector<T> download(const void* device, size_t count) {
  std::vector<T> host(count);
  if (count > 0) FERRY_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Checks what this rank received: per local expert the row count, then each row
// (rows of an expert ordered by source rank, then source token) against the
// regenerated source token (bf16: bit for bit; fp8: within fp8 rounding), and its
// weight. When `expert_outputs` is given, writes there each row times
// expert_scale(e): the input of the combine check.
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
      bool row_ok = true;
      for (size_t g = 0; g < groups && row_ok; ++g) {
        const float amax = block_amax(&x[g * kScaleBlock]);
        for (size_t h = g * kScaleBlock; h < (g + 1) * kScaleBlock; ++h) {
          const size_t i = static_cast<size_t>(j) * H + h;
          float got;
          bool ok;
          if (fp8) {
            got = fp8_value(rows[i]) * scales[static_cast<size_t>(j) * groups + g];
            ok = std::fabs(got - bf16_value(x[h])) <= fp8_tolerance(bf16_value(x[h]), amax);
          } else {
            uint16_t bits;
            std::memcpy(&bits, &rows[i * 2], 2);
            got = bf16_value(bits);
            ok = bits == x[h];
          }
          if (!ok) {
            record.fail(where + " column " + std::to_string(h) + ": got " + std::to_string(got) + ", expected " +
                        std::to_string(bf16_value(x[h])));
            row_ok = false;
            break;
          }
          y[i] = bf16_bits(got * expert_scale(e));
        }
      }
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

// Checks out[t] = sum_k w[t][k] * expert_scale(e_k) * x_t against an fp32 host
// reference: |out - ref| <= 1e-2 * sum_k |w y| + 1e-3 (partial sums cross in bf16),
// plus the fp8 rounding of x for an fp8 dispatch.
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

// Every rank's record; rank 0 prints the failures. True when all ranks passed.
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

// ------------------------------------------------------------------ ferry

struct FerryMeasurement {
  double dispatch_us = 0;
  double combine_us = 0;
  bool used_graph = true;
  bool check_failed = false;
};

SequenceTimingOptions timing_options(const Options& options) {
  SequenceTimingOptions timing;
  timing.iterations_per_graph = options.graph_iters;
  timing.warmup_iterations = options.warmup;
  timing.timed_iterations = options.iters;
  timing.use_graph = options.use_graph;
  return timing;
}

FerryMeasurement measure_ferry(Communicator& comm, const Options& options, const CaseInputs& in, EpMode mode,
                               DataType type, int sms, cudaStream_t stream, const std::string& case_name) {
  Bootstrap& bootstrap = comm.bootstrap();
  const int64_t T = in.tokens;
  const int64_t H = options.hidden;
  EpConfig config;
  config.max_tokens_per_rank = in.tokens;
  config.hidden = options.hidden;
  config.topk = options.topk;
  config.num_experts = options.experts;
  config.dispatch_type = type;
  config.with_weights = true;
  config.num_sms = sms;
  config.mode = mode;
  // The rows this routing needs on the busiest rank (the same on every rank, as the
  // symmetric allocations require) instead of the worst case.
  if (mode == EpMode::kHighThroughput) config.max_recv_rows = std::max<int64_t>(1, in.traffic.max_recv_rows());
  EpBuffer ep(comm, config);

  // DeepEP's conventions: high-throughput fp8 dispatches tokens quantized beforehand
  // (with their scales); low-latency fp8 quantizes bf16 tokens in the kernel.
  const bool fp8_input = type == DataType::kFloat8E4M3 && mode == EpMode::kHighThroughput;
  const TensorView tokens = fp8_input ? TensorView(in.x_fp8->get(), DataType::kFloat8E4M3, {T, H})
                                      : TensorView(in.x_bf16->get(), DataType::kBFloat16, {T, H});
  const TensorView scales =
      fp8_input ? TensorView(in.x_scales->get(), DataType::kFloat32, {T, H / kScaleBlock}) : TensorView();
  const TensorView topk_idx(in.topk_idx->get(), DataType::kInt64, {T, options.topk});
  const TensorView topk_weights(in.topk_weights->get(), DataType::kFloat32, {T, options.topk});
  DeviceBuffer out(static_cast<size_t>(T * H) * 2);
  const TensorView out_view(out.get(), DataType::kBFloat16, {T, H});

  // One eager round: argument errors surface here, and it sizes the expert outputs.
  const DispatchResult first = ep.dispatch(tokens, topk_idx, topk_weights, scales, stream);
  DeviceBuffer expert_outputs(static_cast<size_t>(std::max<int64_t>(first.capacity_rows, 1) * H) * 2);
  FERRY_CUDA_CHECK(cudaMemsetAsync(expert_outputs.get(), 0, expert_outputs.bytes(), stream));
  const TensorView expert_view =
      mode == EpMode::kHighThroughput
          ? TensorView(expert_outputs.get(), DataType::kBFloat16, {first.capacity_rows, H})
          : TensorView(expert_outputs.get(), DataType::kBFloat16, {first.local_experts, first.capacity_per_expert, H});
  ep.combine(expert_view, first.handle, out_view, stream);
  comm.synchronize(stream);

  FerryMeasurement m;
  const CheckContext check{options, in, comm.rank(), comm.size(), ep.local_experts(), mode, type};
  auto poison_out = [&] { FERRY_CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream)); };  // NaN
  if (options.check) {
    m.check_failed |=
        !report_check(bootstrap, check_dispatch(check, first, expert_outputs.get()), case_name, "dispatch");
    poison_out();
    ep.combine(expert_view, first.handle, out_view, stream);
    comm.synchronize(stream);
    m.check_failed |= !report_check(bootstrap, check_combine(check, out.get()), case_name, "combine");
    poison_out();  // the timed iterations must write it themselves
  }

  // Timed: iterations of (dispatch, combine); high-throughput without the host
  // synchronization on the row counts, so both modes can be graph-captured.
  DispatchOptions no_sync;
  no_sync.sync_counts = false;
  DispatchResult last = first;
  TimedSequence sequence;
  sequence.name = case_name;
  sequence.steps = {
      [&](cudaStream_t s) { last = ep.dispatch(tokens, topk_idx, topk_weights, scales, s, no_sync); },
      [&](cudaStream_t s) { ep.combine(expert_view, last.handle, out_view, s); },
  };
  sequence.synchronize = [&](cudaStream_t s) { comm.synchronize(s); };  // surfaces device timeouts
  const SequenceTimingResult timed = time_sequence(sequence, stream, bootstrap, timing_options(options));
  m.dispatch_us = timed.step_us[0];
  m.combine_us = timed.step_us[1];
  m.used_graph = timed.used_graph;

  if (options.halves) {
    // The halves one after another on one stream (no overlap): where the time goes.
    EpHandle handle;
    TimedSequence halves;
    halves.name = case_name + " halves";
    halves.steps = {
        [&](cudaStream_t s) { handle = ep.dispatch_send(tokens, topk_idx, topk_weights, scales, s, no_sync); },
        [&](cudaStream_t s) { last = ep.dispatch_recv(handle, s, no_sync); },
        [&](cudaStream_t s) { ep.combine_send(expert_view, last.handle, s); },
        [&](cudaStream_t s) { ep.combine_recv(last.handle, out_view, s); },
        [&](cudaStream_t s) {  // the same routing again: no layout step
          DispatchOptions reuse = no_sync;
          reuse.reuse = &handle;
          handle = ep.dispatch_send(tokens, TensorView(), topk_weights, scales, s, reuse);
        },
        [&](cudaStream_t s) { last = ep.dispatch_recv(handle, s, no_sync); },
    };
    halves.synchronize = sequence.synchronize;
    const SequenceTimingResult h = time_sequence(halves, stream, bootstrap, timing_options(options));
    if (bootstrap.rank() == 0)
      std::printf("  %s halves (us): dispatch_send %.1f  dispatch_recv %.1f  combine_send %.1f  combine_recv %.1f"
                  "  dispatch_send reusing the layout %.1f\n",
                  case_name.c_str(), h.step_us[0], h.step_us[1], h.step_us[2], h.step_us[3], h.step_us[4]);
  }

  if (options.check) {
    m.check_failed |= !report_check(bootstrap, check_dispatch(check, last, nullptr), case_name, "dispatch, timed");
    m.check_failed |= !report_check(bootstrap, check_combine(check, out.get()), case_name, "combine, timed");
  }
  return m;
}

// ------------------------------------------------------------------ NCCL baseline

struct NcclMeasurement {
  double forward_us = 0;  // the dispatch payload, src -> dst
  double reverse_us = 0;  // the same tokens back in bf16 (combine's direction)
};

#if FERRY_BENCH_HAVE_NCCL
// Buffers of the all-to-all: `by_dst` holds what this rank sends (grouped by
// destination), `by_src` what it receives (grouped by source); bf16-sized.
struct AllToAllBuffers {
  DeviceBuffer by_dst;
  DeviceBuffer by_src;
  AllToAllBuffers(size_t send_bytes, size_t recv_bytes)
      : by_dst(std::max<size_t>(send_bytes, 256)), by_src(std::max<size_t>(recv_bytes, 256)) {}
};

// ncclSend/ncclRecv between every pair of ranks (self included), moving the tokens
// src dispatches to dst times `token_bytes`; `reverse` sends them back.
void enqueue_all_to_all(ncclComm_t comm, const Traffic& traffic, int rank, size_t token_bytes, bool reverse,
                        AllToAllBuffers& buffers, cudaStream_t stream) {
  auto* by_dst = static_cast<uint8_t*>(buffers.by_dst.get());
  auto* by_src = static_cast<uint8_t*>(buffers.by_src.get());
  size_t dst_offset = 0;
  size_t src_offset = 0;
  FERRY_BENCH_NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < traffic.world; ++peer) {
    const size_t to_peer = static_cast<size_t>(traffic.at(traffic.tokens, rank, peer)) * token_bytes;
    const size_t from_peer = static_cast<size_t>(traffic.at(traffic.tokens, peer, rank)) * token_bytes;
    uint8_t* send = reverse ? by_src + src_offset : by_dst + dst_offset;
    uint8_t* recv = reverse ? by_dst + dst_offset : by_src + src_offset;
    const size_t send_bytes = reverse ? from_peer : to_peer;
    const size_t recv_bytes = reverse ? to_peer : from_peer;
    if (send_bytes > 0) FERRY_BENCH_NCCL_CHECK(ncclSend(send, send_bytes, ncclUint8, peer, comm, stream));
    if (recv_bytes > 0) FERRY_BENCH_NCCL_CHECK(ncclRecv(recv, recv_bytes, ncclUint8, peer, comm, stream));
    dst_offset += to_peer;
    src_offset += from_peer;
  }
  FERRY_BENCH_NCCL_CHECK(ncclGroupEnd());
}

NcclMeasurement measure_nccl(NcclCommunicator& nccl, Bootstrap& bootstrap, const Options& options,
                             const CaseInputs& in, DataType type, AllToAllBuffers& buffers, cudaStream_t stream,
                             const std::string& case_name) {
  const int rank = bootstrap.rank();
  const size_t forward_bytes = bytes_per_token(type, options.hidden);
  const size_t reverse_bytes = bytes_per_token(DataType::kBFloat16, options.hidden);
  TimedSequence sequence;
  sequence.name = case_name;
  sequence.steps = {
      [&](cudaStream_t s) { enqueue_all_to_all(nccl.get(), in.traffic, rank, forward_bytes, false, buffers, s); },
      [&](cudaStream_t s) { enqueue_all_to_all(nccl.get(), in.traffic, rank, reverse_bytes, true, buffers, s); },
  };
  for (const auto& step : sequence.steps) step(stream);  // connects the peers outside the capture
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  const SequenceTimingResult timed = time_sequence(sequence, stream, bootstrap, timing_options(options));
  return {timed.step_us[0], timed.step_us[1]};
}
#endif

// ------------------------------------------------------------------ report

struct Row {
  std::string op;      // "dispatch bf16", "dispatch fp8", "combine bf16"
  size_t token_bytes;  // payload of one token on the wire
  double ferry_us;
  bool used_graph;
  bool check_failed;
  std::optional<double> nccl_us;
};

double gbps(int64_t tokens, size_t token_bytes, double us) {
  return static_cast<double>(tokens) * static_cast<double>(token_bytes) / (us * 1e3);
}

}  // namespace

void print_ep_usage(std::FILE* out) {
  std::fprintf(out,
      "usage: mpirun -np N ferry-bench ep [options]   (one GPU per rank, N = 1..8, one node)\n"
      "\n"
      "Times ferry's EP dispatch (bf16, fp8) and combine (bf16) in both modes against an NCCL\n"
      "ncclSend/ncclRecv all-to-all moving the same bytes between every pair of ranks.\n"
      "Iterations of (dispatch, combine), G per CUDA graph, an event around each op; per op the\n"
      "median over iterations, max over ranks. GB/s (DeepEP's convention): token payload the\n"
      "busiest rank receives, its own tokens included (a token once per destination rank), / t;\n"
      "NVL GB/s: the same without its own tokens. fp8 token = H + H/128*4 bytes (scales).\n"
      "Reference problems: ht 4096 tokens/rank, ll 128; hidden 7168, top-8 of 256 experts.\n"
      "\n"
      "  --mode M             ht, ll or both (default both)\n"
      "  --tokens LIST        tokens per rank (default 4096 for ht, 128 for ll), e.g. 1024,4096\n"
      "  --hidden H           hidden size, a multiple of 128 (default 7168)\n"
      "  --topk K             experts per token (default 8)\n"
      "  --experts E          experts in all, divisible by N (default 256)\n"
      "  --sms LIST           SMs the EP kernels may use, 0 = all (default 24 for ht, 0 for ll)\n"
      "  --dispatch-types L   bf16, fp8 (default both; ht fp8 dispatches tokens quantized beforehand,\n"
      "                       ll fp8 quantizes bf16 tokens in the kernel, as DeepEP's benchmarks do)\n"
      "  --skew X             0: uniform random routing (default); X > 0: expert of popularity rank p\n"
      "                       drawn with weight 1/(p+1)^X (popularity: a random order of the experts)\n"
      "  --seed S             routing and token seed (default 1)\n"
      "  --iters N            timed iterations per case (default: 100..2000, ~0.2 s per case)\n"
      "  --warmup N           warm-up iterations per case (default 20)\n"
      "  --graph-iters G      (dispatch, combine) iterations per CUDA graph (default 10)\n"
      "  --no-graph           launch directly instead of replaying a graph\n"
      "  --csv PATH           CSV of every row (default ferry_ep.csv; '' for none)\n"
      "  --no-nccl            skip the NCCL baseline\n"
      "  --halves             also time dispatch_send, dispatch_recv, combine_send, combine_recv one\n"
      "                       after another (no overlap), and dispatch_send reusing the layout\n"
      "  --check              verify each case, after an eager round and again after the timed ones:\n"
      "                       per local expert the row count, every row (ordered by source rank, then\n"
      "                       token) against the regenerated source token (bf16 exact, fp8 within its\n"
      "                       rounding) and its weight; then combine of rows scaled per expert\n"
      "                       (2^(e%%4-1)) against an fp32 host reference. Exit 1 on a mismatch\n"
      "  --help               this text\n"
      "\n"
      "Environment: NCCL_NVLS_ENABLE must be 0 (set to 0 when unset; NVLink multicast stays off).\n");
}

int run_ep_bench(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options options = parse_options(std::move(args));
  const int rank = bootstrap->rank();
  const int world = bootstrap->size();
  const bool leader = rank == 0;
  if (options.experts % world != 0) {
    throw UsageError("--experts " + std::to_string(options.experts) + " is not divisible by the world size " +
                     std::to_string(world) + " (each rank holds E / N experts)");
  }
  require_cuda_device("ferry-bench ep");
  keep_nvls_disabled(leader);

  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int local_experts = options.experts / world;
  const Router router(options.experts, options.topk, options.skew, options.seed);

  bool use_nccl = options.use_nccl;
#if FERRY_BENCH_HAVE_NCCL
  std::optional<NcclCommunicator> nccl;
  if (use_nccl) nccl.emplace(*bootstrap);
#else
  if (use_nccl && leader) std::printf("note: built without NCCL; no baseline\n");
  use_nccl = false;
#endif

  CudaStream stream;
  std::optional<CsvWriter> csv;
  if (leader && !options.csv_path.empty()) {
    csv.emplace(options.csv_path,
                std::vector<std::string>{"mode", "op", "world_size", "tokens", "hidden", "topk", "experts", "sms",
                                         "skew", "recv_tokens", "nvlink_tokens", "recv_rows", "recv_bytes",
                                         "nvlink_bytes", "ferry_us", "ferry_gbps", "ferry_nvlink_gbps", "nccl_us",
                                         "nccl_gbps", "speedup_vs_nccl", "graph"});
  }
  auto tokens_for = [&](EpMode mode) {
    if (!options.tokens.empty()) return options.tokens;
    return std::vector<int>{mode == EpMode::kHighThroughput ? kDefaultHtTokens : kDefaultLlTokens};
  };
  auto sms_for = [&](EpMode mode) {
    if (!options.sms.empty()) return options.sms;
    return std::vector<int>{mode == EpMode::kHighThroughput ? kDefaultHtSms : kDefaultLlSms};
  };
  auto list = [](const std::vector<int>& values, int zero_as) {
    std::string text;
    for (int v : values) {
      if (!text.empty()) text += ',';
      text += std::to_string(v == 0 ? zero_as : v);
    }
    return text;
  };

  if (leader) {
    cudaDeviceProp prop{};
    FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, comm.device()));
    std::printf("ferry-bench ep: W=%d ranks (%d per node), %s", world, comm.local_size(), prop.name);
#if FERRY_BENCH_HAVE_NCCL
    if (use_nccl) std::printf(", NCCL %s", nccl_library_version().c_str());
#endif
    std::printf("\n  model: H=%d, top-%d of E=%d experts (%d per rank), routing %s (seed %llu)\n", options.hidden,
                options.topk, options.experts, local_experts,
                options.skew == 0 ? "uniform random" : ("skewed, exponent " + format_fixed(options.skew, 2)).c_str(),
                static_cast<unsigned long long>(options.seed));
    for (EpMode mode : options.modes) {
      std::printf("  %s: T=%s tokens/rank, SMs %s\n", mode_label(mode), list(tokens_for(mode), 0).c_str(),
                  list(sms_for(mode), comm.num_sms()).c_str());
    }
    std::printf("  time: (dispatch, combine) iterations, %d per CUDA graph, event around each op, median over\n"
                "  iterations, max over ranks (us); recv: tokens the busiest rank receives, its own included;\n"
                "  GB/s: recv * bytes per token / t (DeepEP's convention); NVL: without its own tokens;\n"
                "  x: NCCL time / ferry time; '!': failed check; '*': not in a CUDA graph\n\n",
                options.graph_iters);
  }

  const TablePrinter table({{"", "mode", 4, true},
                            {"", "op", 13, true},
                            {"", "tokens", 6},
                            {"", "SMs", 4},
                            {"", "recv", 7},
                            {"ferry", "us", 9},
                            {"ferry", "GB/s", 7},
                            {"ferry", "NVL GB/s", 8},
                            {"nccl all-to-all", "us", 9},
                            {"nccl all-to-all", "GB/s", 7},
                            {"", "x", 5}});
  if (leader) table.print_header();

  bool failed = false;
  for (EpMode mode : options.modes) {
    for (int tokens : tokens_for(mode)) {
      CaseInputs in;
      in.tokens = tokens;
      make_inputs(in, options, router, *bootstrap, local_experts);

      // The baseline does not depend on the SM count: measured once per dispatch type.
      std::vector<std::optional<NcclMeasurement>> nccl_results(options.dispatch_types.size());
#if FERRY_BENCH_HAVE_NCCL
      if (use_nccl) {
        const size_t bf16_bytes = bytes_per_token(DataType::kBFloat16, options.hidden);
        int64_t sent = 0;
        for (int dst = 0; dst < world; ++dst) sent += in.traffic.at(in.traffic.tokens, rank, dst);
        AllToAllBuffers buffers(static_cast<size_t>(sent) * bf16_bytes,
                                static_cast<size_t>(in.traffic.received(in.traffic.tokens, rank, true)) * bf16_bytes);
        for (size_t i = 0; i < options.dispatch_types.size(); ++i) {
          const std::string name = std::string(mode_label(mode)) + " T=" + std::to_string(tokens) + " nccl " +
                                   type_label(options.dispatch_types[i]);
          bootstrap->barrier();
          nccl_results[i] = measure_nccl(*nccl, *bootstrap, options, in, options.dispatch_types[i], buffers,
                                         stream.get(), name);
        }
      }
#endif

      for (int sms : sms_for(mode)) {
        const int effective_sms = sms == 0 ? comm.num_sms() : sms;
        std::vector<Row> rows;
        std::optional<Row> combine;  // one combine row: from the bf16 buffer when there is one
        for (size_t i = 0; i < options.dispatch_types.size(); ++i) {
          const DataType type = options.dispatch_types[i];
          const std::string name = std::string(mode_label(mode)) + " " + type_label(type) + " T=" +
                                   std::to_string(tokens) + " SMs=" + std::to_string(sms);
          bootstrap->barrier();  // cases start together
          FerryMeasurement m;
          try {
            m = measure_ferry(comm, options, in, mode, type, sms, stream.get(), name);
          } catch (const ferry::NotSupported& e) {  // argument checks: the same on every rank
            if (leader) std::printf("error: %s: %s\n", name.c_str(), e.what());
            failed = true;
            continue;
          } catch (const ferry::InvalidArgument& e) {
            if (leader) std::printf("error: %s: %s\n", name.c_str(), e.what());
            failed = true;
            continue;
          }
          failed |= m.check_failed;
          const auto& baseline = nccl_results[i];
          rows.push_back({std::string("dispatch ") + type_label(type), bytes_per_token(type, options.hidden),
                          m.dispatch_us, m.used_graph, m.check_failed,
                          baseline ? std::optional<double>(baseline->forward_us) : std::nullopt});
          if (!combine || type == DataType::kBFloat16) {
            combine = Row{"combine bf16", bytes_per_token(DataType::kBFloat16, options.hidden), m.combine_us,
                          m.used_graph, m.check_failed,
                          baseline ? std::optional<double>(baseline->reverse_us) : std::nullopt};
          }
        }
        if (combine) rows.push_back(*combine);
        if (!leader) continue;

        const int64_t recv = in.traffic.max_recv_tokens();
        const int64_t nvlink = in.traffic.max_nvlink_tokens();
        for (const Row& row : rows) {
          const double bw = gbps(recv, row.token_bytes, row.ferry_us);
          const double nvl_bw = gbps(nvlink, row.token_bytes, row.ferry_us);
          const bool has_nccl = row.nccl_us.has_value();
          const double nccl_us = row.nccl_us.value_or(0.0);
          const double nccl_bw = has_nccl ? gbps(recv, row.token_bytes, nccl_us) : 0.0;
          const double speedup = has_nccl ? nccl_us / row.ferry_us : 0.0;
          std::string us = format_fixed(row.ferry_us, 1);
          if (row.check_failed) us += "!";
          if (!row.used_graph) us += "*";
          table.print_row({mode_label(mode), row.op, std::to_string(tokens), std::to_string(effective_sms),
                           std::to_string(recv), us, format_fixed(bw, 1), world > 1 ? format_fixed(nvl_bw, 1) : "-",
                           has_nccl ? format_fixed(nccl_us, 1) : "-", has_nccl ? format_fixed(nccl_bw, 1) : "-",
                           has_nccl ? format_fixed(speedup, 2) : "-"});
          if (csv && !row.check_failed) {  // a wrong result is not a measurement
            csv->write_row({mode_label(mode), row.op, std::to_string(world), std::to_string(tokens),
                            std::to_string(options.hidden), std::to_string(options.topk),
                            std::to_string(options.experts), std::to_string(effective_sms),
                            format_fixed(options.skew, 3), std::to_string(recv), std::to_string(nvlink),
                            std::to_string(in.traffic.max_recv_rows()),
                            std::to_string(static_cast<size_t>(recv) * row.token_bytes),
                            std::to_string(static_cast<size_t>(nvlink) * row.token_bytes),
                            format_fixed(row.ferry_us, 3), format_fixed(bw, 3), format_fixed(nvl_bw, 3),
                            has_nccl ? format_fixed(nccl_us, 3) : "", has_nccl ? format_fixed(nccl_bw, 3) : "",
                            has_nccl ? format_fixed(speedup, 3) : "", row.used_graph ? "1" : "0"});
          }
        }
      }
    }
  }
  if (leader) {
    if (csv) std::printf("\nwrote %s\n", csv->path().c_str());
    if (options.check) std::printf("check: %s\n", failed ? "FAILURES (see above)" : "all cases match");
    if (failed) std::printf("ferry-bench ep: some cases failed (see above)\n");
  }
  return failed ? 1 : 0;
}

}  // namespace ferry::bench
