// Host reference for the EP dispatch/combine tests (no CUDA, no library code):
// inputs generated from (seed, rank) so every rank can regenerate every rank's
// tokens and routing, the placement the dispatch contract prescribes, the fp8
// e4m3 format, the stand-in expert, and the combine result with its tolerance.
//
// Contract modelled here (include/ferry/ep.hpp, DESIGN.md "EP semantics"):
//  - rank d owns experts [d * Le, (d + 1) * Le); the rows of local expert le are
//    the (src_rank, src_token, k) with topk_idx == d * Le + le, ordered by
//    src_rank, then src_token, then k;
//  - high-throughput: expert le starts at offsets[le], offsets[0] = 0,
//    offsets[le + 1] = offsets[le] + round_up(count[le], alignment);
//    low-latency: expert le starts at le * capacity, capacity = world * T;
//  - combine: out[t] = sum over k with topk_idx[t][k] >= 0 of w[t][k] * y(t, k).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/host_types.hpp"

namespace ferry::testing::ep {

// ---------------------------------------------------------------- randomness
inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A seed for one named stream of numbers (e.g. rank r's routing).
inline uint64_t sub_seed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(seed ^ (a * 0x632be59bd9b4e019ull)) ^ (b * 0x8cb92ba72f3d8dd7ull)) ^
               (c * 0xd6e8feb86659fd93ull));
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(mix64(seed)) {}
  uint64_t next() { return mix64(state_ += 0x2545f4914f6cdd1dull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// ---------------------------------------------------------------- fp8 e4m3 (the "fn" variant)
// 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity; S.1111.111 is NaN;
// largest finite 448; subnormals are m * 2^-9.
constexpr int kScaleGroup = 128;    // columns covered by one fp32 scale
constexpr float kFp8Max = 448.0f;   // largest finite e4m3 value
constexpr float kMinAmax = 1e-4f;   // amax floor of the in-kernel quantization

inline bool fp8_is_nan(uint8_t b) { return (b & 0x7fu) == 0x7fu; }
inline float fp8_to_float(uint8_t b) {
  const int sign = (b >> 7) & 1, exp = (b >> 3) & 0xf, mant = b & 7;
  if (exp == 0xf && mant == 7) return std::nanf("");
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                             : std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

// The scale the contract prescribes for a 128-column group whose largest
// magnitude is `amax`: max(amax, 1e-4) / 448.
inline float expected_scale(float amax) { return std::max(amax, kMinAmax) / kFp8Max; }

// Largest |q * scale - x| for round-to-nearest quantization of x / scale to
// e4m3 (|x / scale| <= 448): half an ulp, which is at most 2^-4 of the value
// for normals (3 mantissa bits) and half the subnormal step 2^-9 below 2^-6.
// The 2^-9 (rather than 2^-10) absolute term and the 1e-5 relative slack cover
// x / scale itself being rounded in fp32 before the conversion (it may then
// land on the other side of a rounding midpoint).
inline double fp8_quant_bound(double x, double scale) {
  return 0.0625 * (1.0 + 1e-5) * std::fabs(x) + 0x1p-9 * scale;
}

// ---------------------------------------------------------------- problems
enum class Routing {
  kUniform,    // K distinct experts, uniformly
  kDrops,      // uniform, then slots (and whole tokens) set to -1
  kZipf,       // K distinct experts drawn from a Zipf(1.2) popularity over a shuffled expert order
  kOneExpert,  // every token picks `hot` (in slot t % K), every other slot -1
  kOneRank,    // every token picks min(K, Le) distinct experts of rank `hot`, the other slots -1
  kNone,       // every slot -1
};
enum class TokenCounts {
  kFull,       // T' = T on every rank
  kVaried,     // T' in [1, T]
  kSomeZero,   // odd ranks 0, the others in [1, T]
  kOnlyRank0,  // rank 0 T, the others 0
  kAllZero,    // 0 everywhere
};

struct Spec {
  int world = 1;
  int max_tokens = 0;  // T
  int hidden = 0;      // H
  int topk = 0;        // K
  int num_experts = 0; // E
  bool with_weights = true;
  bool fp8_input = false;  // tokens arrive as e4m3 bytes with per-128-column scales
  Routing routing = Routing::kUniform;
  TokenCounts counts = TokenCounts::kVaried;
  int hot = 0;  // kOneExpert: the expert; kOneRank: the rank
  uint64_t seed = 0;
  int local_experts() const { return num_experts / world; }
  int groups() const { return hidden / kScaleGroup; }
  int64_t capacity() const { return static_cast<int64_t>(world) * max_tokens; }  // low-latency rows per expert
};

// One rank's inputs, as that rank holds them on the host.
struct RankInput {
  int num_tokens = 0;
  std::vector<int64_t> idx;      // [T', K], -1 = no expert
  std::vector<float> weights;    // [T', K] when with_weights
  std::vector<uint16_t> x;       // [T', H] bf16 bits (bf16 input)
  std::vector<uint8_t> q;        // [T', H] e4m3 bytes (fp8 input)
  std::vector<float> scales;     // [T', H / 128] (fp8 input)

  // Element (t, h) as a float: the bf16 value, or q * scale for fp8 input.
  float value(const Spec& s, int t, int h) const {
    const size_t i = static_cast<size_t>(t) * s.hidden + h;
    if (!s.fp8_input) return bf16_to_float(x[i]);
    return fp8_to_float(q[i]) * scales[static_cast<size_t>(t) * s.groups() + h / kScaleGroup];
  }
  // Largest magnitude of group g of token t (bf16 input).
  float amax(const Spec& s, int t, int g) const {
    float m = 0.0f;
    for (int h = g * kScaleGroup; h < (g + 1) * kScaleGroup; ++h) m = std::max(m, std::fabs(value(s, t, h)));
    return m;
  }
  float weight(const Spec& s, int t, int k) const {
    return s.with_weights ? weights[static_cast<size_t>(t) * s.topk + k] : 1.0f;
  }
  int64_t expert(const Spec& s, int t, int k) const { return idx[static_cast<size_t>(t) * s.topk + k]; }
};

inline int tokens_on_rank(const Spec& s, int rank) {
  Rng rng(sub_seed(s.seed, 1, static_cast<uint64_t>(rank)));
  const int varied = s.max_tokens > 0 ? 1 + rng.below(s.max_tokens) : 0;
  switch (s.counts) {
    case TokenCounts::kFull: return s.max_tokens;
    case TokenCounts::kVaried: return varied;
    case TokenCounts::kSomeZero: return rank % 2 == 1 ? 0 : varied;
    case TokenCounts::kOnlyRank0: return rank == 0 ? s.max_tokens : 0;
    case TokenCounts::kAllZero: return 0;
  }
  return 0;
}

// Experts in decreasing Zipf popularity (the same order on every rank) and the
// cumulative distribution over that order.
struct ZipfTable {
  std::vector<int> order;
  std::vector<double> cdf;
  ZipfTable(const Spec& s) : order(static_cast<size_t>(s.num_experts)), cdf(order.size()) {
    Rng rng(sub_seed(s.seed, 2));
    for (int e = 0; e < s.num_experts; ++e) order[e] = e;
    for (int i = s.num_experts - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    double acc = 0;
    for (int i = 0; i < s.num_experts; ++i) cdf[i] = (acc += std::pow(i + 1.0, -1.2));
    for (double& c : cdf) c /= acc;
  }
  int draw(Rng& rng) const {
    const double u = rng.uniform();
    const size_t i = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    return order[std::min(i, order.size() - 1)];
  }
};

inline void route_token(const Spec& s, const ZipfTable& zipf, Rng& rng, int64_t* slots) {
  const int K = s.topk, E = s.num_experts, Le = s.local_experts();
  for (int k = 0; k < K; ++k) slots[k] = -1;
  auto taken = [&](int64_t e, int upto) {
    for (int j = 0; j < upto; ++j)
      if (slots[j] == e) return true;
    return false;
  };
  switch (s.routing) {
    case Routing::kUniform:
    case Routing::kDrops:
    case Routing::kZipf: {
      for (int k = 0; k < K; ++k) {
        int64_t e = -1;
        for (int attempt = 0; attempt < 100000; ++attempt) {
          const int64_t c = s.routing == Routing::kZipf ? zipf.draw(rng) : rng.below(E);
          if (!taken(c, k)) {
            e = c;
            break;
          }
        }
        slots[k] = e;
      }
      if (s.routing == Routing::kDrops) {
        const bool none = rng.below(16) == 0;  // a token with no expert at all
        for (int k = 0; k < K; ++k)
          if (none || rng.below(5) == 0) slots[k] = -1;
      }
      break;
    }
    case Routing::kOneExpert: {
      slots[rng.below(K)] = s.hot;
      break;
    }
    case Routing::kNone: break;
    case Routing::kOneRank: {
      const int m = std::min(K, Le);
      // m distinct local experts of rank `hot`, in m distinct random slots.
      std::vector<int> local(static_cast<size_t>(Le)), pos(static_cast<size_t>(K));
      for (int i = 0; i < Le; ++i) local[i] = i;
      for (int i = 0; i < K; ++i) pos[i] = i;
      for (int i = 0; i < m; ++i) {
        std::swap(local[i], local[i + rng.below(Le - i)]);
        std::swap(pos[i], pos[i + rng.below(K - i)]);
        slots[pos[i]] = static_cast<int64_t>(s.hot) * Le + local[i];
      }
      break;
    }
  }
}

// Token values: per 128-column group a magnitude 2^e (e in [-6, 3]), with some
// all-zero groups and some below the 1e-4 amax floor, so the per-group fp8
// scales differ within a row and hit both edge cases.
inline RankInput make_input(const Spec& s, int rank) {
  RankInput in;
  in.num_tokens = tokens_on_rank(s, rank);
  const size_t T = static_cast<size_t>(in.num_tokens), K = static_cast<size_t>(s.topk),
               H = static_cast<size_t>(s.hidden), G = static_cast<size_t>(s.groups());
  in.idx.resize(T * K);
  const ZipfTable zipf(s);
  Rng route(sub_seed(s.seed, 3, static_cast<uint64_t>(rank)));
  for (size_t t = 0; t < T; ++t) route_token(s, zipf, route, &in.idx[t * K]);
  if (s.with_weights) {
    in.weights.resize(T * K);
    Rng w(sub_seed(s.seed, 4, static_cast<uint64_t>(rank)));
    for (float& v : in.weights) v = static_cast<float>(0.05 + 0.95 * w.uniform());
  }
  if (s.fp8_input) {
    in.q.resize(T * H);
    in.scales.resize(T * G);
    Rng r(sub_seed(s.seed, 5, static_cast<uint64_t>(rank)));
    for (uint8_t& b : in.q) {
      b = static_cast<uint8_t>(r.next());
      if (fp8_is_nan(b)) b = static_cast<uint8_t>(b - 1);  // S.1111.110 = +-448
    }
    for (float& sc : in.scales) sc = std::ldexp(static_cast<float>(1.0 + r.uniform()), -8 - r.below(6));
  } else {
    in.x.resize(T * H);
    for (size_t t = 0; t < T; ++t) {
      Rng r(sub_seed(s.seed, 6, static_cast<uint64_t>(rank), t));
      for (size_t g = 0; g < G; ++g) {
        const int kind = r.below(16);
        const double mag = kind == 0 ? 0.0 : kind == 1 ? 0x1p-17 : std::ldexp(1.0, r.below(10) - 6);
        for (size_t h = g * kScaleGroup; h < (g + 1) * kScaleGroup; ++h)
          in.x[t * H + h] = float_to_bf16(static_cast<float>(mag * (2.0 * r.uniform() - 1.0)));
      }
    }
  }
  return in;
}

inline std::vector<RankInput> make_all_inputs(const Spec& s) {
  std::vector<RankInput> all;
  for (int r = 0; r < s.world; ++r) all.push_back(make_input(s, r));
  return all;
}

// ---------------------------------------------------------------- stand-in expert
// Output of global expert e for an input element: bf16(value * factor(e)). The
// factor depends on the global id, so rows landing at the wrong expert change
// the combine result.
inline float expert_factor(int64_t e) { return 1.0f + 0.0625f * static_cast<float>(e % 13); }
inline uint16_t stand_in(float value, int64_t e) { return float_to_bf16(value * expert_factor(e)); }

// ---------------------------------------------------------------- placement
struct Entry {
  int src_rank = 0, src_token = 0, k = 0;
};
struct Layout {
  std::vector<std::vector<Entry>> rows;  // per local expert, in row order
  std::vector<int64_t> counts;           // [Le]
  std::vector<int64_t> offsets;          // [Le + 1]
  int64_t total_rows() const { return offsets.back(); }
};

inline int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Rows rank `dest` must receive. alignment > 0: high-throughput offsets;
// alignment == 0: low-latency slabs of spec.capacity() rows.
inline Layout reference_layout(const Spec& s, const std::vector<RankInput>& all, int dest, int alignment) {
  const int Le = s.local_experts();
  Layout l;
  l.rows.resize(static_cast<size_t>(Le));
  for (int sr = 0; sr < s.world; ++sr)
    for (int t = 0; t < all[sr].num_tokens; ++t)
      for (int k = 0; k < s.topk; ++k) {
        const int64_t e = all[sr].expert(s, t, k);
        if (e >= static_cast<int64_t>(dest) * Le && e < static_cast<int64_t>(dest + 1) * Le)
          l.rows[static_cast<size_t>(e - static_cast<int64_t>(dest) * Le)].push_back(Entry{sr, t, k});
      }
  l.counts.resize(static_cast<size_t>(Le));
  l.offsets.assign(static_cast<size_t>(Le) + 1, 0);
  for (int le = 0; le < Le; ++le) {
    l.counts[le] = static_cast<int64_t>(l.rows[le].size());
    l.offsets[le + 1] = alignment > 0 ? l.offsets[le] + round_up(l.counts[le], alignment)
                                      : (le + 1) * s.capacity();
  }
  return l;
}

// ---------------------------------------------------------------- combine
// How the expert outputs the test feeds to combine were made.
enum class ExpertKind {
  kStandIn,   // y = stand_in(received value, e), the received value exact (bf16, or fp8 input)
  kQuantized, // same, but the received value is bf16 input quantized to fp8 in the dispatch
  kIdentity,  // y = the received bf16 row itself (expert_outputs = the dispatch output)
};

struct CombineRef {
  std::vector<double> ref, tol;  // [T', H]
  std::vector<char> no_expert;   // [T']: every slot -1, the output must be exactly 0
};

// Tolerance: the combine accumulates in fp32 but rounds each destination rank's
// partial sum to bf16 before it crosses back, then rounds the final sum to bf16.
// bf16 keeps 8 significant bits, so one rounding to nearest moves a value by at
// most 2^-8 of its magnitude, and every intermediate magnitude is bounded by
// S = sum_k |w_k y_k|: two roundings, <= 2 * 2^-8 S. The stand-in's own bf16
// output is a third where the reference uses the unrounded y (kQuantized), and
// the hierarchical path (`hierarchical`: FERRY_EP_HIERARCHICAL, nodes of several
// ranks) rounds a node's sum of partials to bf16 once more. Each rounding gets
// 2^-8 S, plus 2^-10 S for the fp32 accumulation (~K * 2^-24 S) and the order of
// the sums. (The earlier flat 1e-2 S assumed 2^-9 per rounding, half the bf16
// bound: it rejected correct hierarchical sums, e.g. 2.1875 for an exact 2.16451
// with S = 2.16451, three roundings at near their bound; 2x2 on 2 H100s, session
// 21.) kQuantized adds each term's fp8 error |w| * factor * fp8_quant_bound. The
// 1e-6 absolute term is only for S ~ 0.
inline CombineRef combine_reference(const Spec& s, const RankInput& mine, ExpertKind kind,
                                    bool hierarchical = false) {
  const size_t T = static_cast<size_t>(mine.num_tokens), H = static_cast<size_t>(s.hidden);
  const int roundings = 2 + (kind == ExpertKind::kQuantized ? 1 : 0) + (hierarchical ? 1 : 0);
  const double relative = roundings * 0x1p-8 + 0x1p-10;
  CombineRef c;
  c.ref.assign(T * H, 0.0);
  c.tol.assign(T * H, 0.0);
  c.no_expert.assign(T, 1);
  std::vector<double> mag(H), qerr(H);
  for (size_t t = 0; t < T; ++t) {
    std::fill(mag.begin(), mag.end(), 0.0);
    std::fill(qerr.begin(), qerr.end(), 0.0);
    for (int k = 0; k < s.topk; ++k) {
      const int64_t e = mine.expert(s, static_cast<int>(t), k);
      if (e < 0) continue;
      c.no_expert[t] = 0;
      const double w = mine.weight(s, static_cast<int>(t), k);
      const float f = kind == ExpertKind::kIdentity ? 1.0f : expert_factor(e);
      for (int g = 0; g < s.groups(); ++g) {
        const double scale = kind == ExpertKind::kQuantized ? expected_scale(mine.amax(s, static_cast<int>(t), g)) : 0.0;
        for (size_t h = static_cast<size_t>(g) * kScaleGroup; h < static_cast<size_t>(g + 1) * kScaleGroup; ++h) {
          const float v = mine.value(s, static_cast<int>(t), static_cast<int>(h));
          double y;
          if (kind == ExpertKind::kIdentity) y = v;
          else if (kind == ExpertKind::kStandIn) y = bf16_to_float(stand_in(v, e));
          else {
            y = static_cast<double>(v) * f;
            qerr[h] += std::fabs(w) * f * fp8_quant_bound(v, scale);
          }
          c.ref[t * H + h] += w * y;
          mag[h] += std::fabs(w * y);
        }
      }
    }
    for (size_t h = 0; h < H; ++h) c.tol[t * H + h] = relative * mag[h] + qerr[h] + 1e-6;
  }
  return c;
}

}  // namespace ferry::testing::ep
