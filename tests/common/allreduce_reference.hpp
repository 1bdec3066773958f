// The AllReduce tests' inputs and exact reference (test_allreduce.cpp and the
// soak, soak.cpp): values exact in their type, a reference in long double, and a
// tolerance derived from the accumulation the kernels do.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/host_types.hpp"
#include "ferry/types.hpp"

namespace ferry::testing {

inline uint64_t allreduce_mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Values are exact in their type and chosen so the reference is well defined:
// sums of [-1,1) (ints: full width divided by the world size, so no overflow),
// products of +-(1 +- 1/4) (ints: [-3,3]), min/max over wide ranges (ints: all bits).
inline double gen_float(::ferry::DataType t, ::ferry::ReduceOp op, uint64_t u) {
  const double x = static_cast<double>(u >> 11) * 0x1p-52 - 1.0;  // [-1, 1)
  double v = x;
  if (op == ::ferry::ReduceOp::kProd) v = ((u & 1) ? -1.0 : 1.0) * (1.0 + 0.25 * x);
  if (op == ::ferry::ReduceOp::kMin || op == ::ferry::ReduceOp::kMax) v = 100.0 * x;
  switch (t) {
    case ::ferry::DataType::kFloat32: return static_cast<float>(v);
    case ::ferry::DataType::kBFloat16: return round_bf16(static_cast<float>(v));
    case ::ferry::DataType::kFloat16: return round_f16(static_cast<float>(v));
    default: return v;
  }
}
inline int64_t gen_int(::ferry::DataType t, ::ferry::ReduceOp op, uint64_t u, int world) {
  const bool i32 = t == ::ferry::DataType::kInt32;
  if (op == ::ferry::ReduceOp::kProd) return static_cast<int64_t>(u % (world <= 19 ? 7 : 3)) - (world <= 19 ? 3 : 1);
  if (op == ::ferry::ReduceOp::kMin || op == ::ferry::ReduceOp::kMax) return i32 ? int64_t{static_cast<int32_t>(u)} : static_cast<int64_t>(u);
  const uint64_t lim = (i32 ? uint64_t{INT32_MAX} : uint64_t{INT64_MAX}) / static_cast<uint64_t>(world);
  return static_cast<int64_t>(u % (2 * lim + 1)) - static_cast<int64_t>(lim);
}
struct HostCase {
  std::vector<uint8_t> input;   // this rank's input
  std::vector<double> ref, tol; // float types
  std::vector<int64_t> iref;    // int types
};

// 16-bit and fp32 types accumulate in fp32 and round once; fp64 in fp64.
// `node_partials` > 0: the hierarchical algorithm, which rounds each of that
// many node partials to the type before it reduces them (a second rounding for
// 16-bit types; fp32, fp64 and integers keep their partials exact).
inline HostCase make_case(::ferry::DataType t, ::ferry::ReduceOp op, size_t count, uint64_t seed, int rank, int world, int node_partials = 0) {
  const size_t sz = elem_size(t);
  const double rel = t == ::ferry::DataType::kBFloat16 ? 1e-2 : t == ::ferry::DataType::kFloat16 ? 2e-3 : t == ::ferry::DataType::kFloat32 ? 1e-5 : 1e-12;
  const double acc_eps = 2.0 * world * (t == ::ferry::DataType::kFloat64 ? 0x1p-53 : 0x1p-24);
  // Rounding a partial p to a 16-bit type moves it by at most u|p| (u: the
  // type's unit roundoff). Sums: partial n is a sum over its node, so
  // |p_n| <= the node's share of `mag` and the result moves by at most u * mag
  // (then rounded once more: the factor 1 + rel, as rel >= u). Products: N
  // factors each off by a relative u: gamma_N = N u / (1 - N u), relative.
  const double u = !node_partials ? 0.0 : t == ::ferry::DataType::kBFloat16 ? 0x1p-8 : t == ::ferry::DataType::kFloat16 ? 0x1p-11 : 0.0;
  const double partial_sum_eps = (1.0 + rel) * u;
  const double partial_prod_eps = (1.0 + rel) * node_partials * u / (1.0 - node_partials * u);
  std::vector<uint64_t> rs(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) rs[r] = allreduce_mix(seed ^ (0x632be59bd9b4e019ull * static_cast<uint64_t>(r + 1)));
  HostCase hc;
  hc.input.resize(count * sz);
  if (is_int(t)) hc.iref.resize(count); else { hc.ref.resize(count); hc.tol.resize(count); }
  for (size_t i = 0; i < count; ++i) {
    if (is_int(t)) {
      int64_t acc = 0;
      for (int r = 0; r < world; ++r) {
        const int64_t v = gen_int(t, op, allreduce_mix(rs[r] ^ i), world);
        if (r == rank) store_element(t, &hc.input[i * sz], 0, v);
        if (r == 0) acc = v;
        else if (op == ::ferry::ReduceOp::kSum || op == ::ferry::ReduceOp::kAvg) acc += v;
        else if (op == ::ferry::ReduceOp::kProd) acc *= v;
        else if (op == ::ferry::ReduceOp::kMin) acc = std::min(acc, v);
        else acc = std::max(acc, v);
      }
      hc.iref[i] = op == ::ferry::ReduceOp::kAvg ? acc / world : acc;  // C++ division truncates toward zero
    } else {
      long double acc = 0, mag = 0;
      for (int r = 0; r < world; ++r) {
        const double v = gen_float(t, op, allreduce_mix(rs[r] ^ i));
        if (r == rank) store_element(t, &hc.input[i * sz], v, 0);
        mag += std::fabs(v);
        if (r == 0) acc = v;
        else if (op == ::ferry::ReduceOp::kSum || op == ::ferry::ReduceOp::kAvg) acc += v;
        else if (op == ::ferry::ReduceOp::kProd) acc *= v;
        else if (op == ::ferry::ReduceOp::kMin) acc = std::min<long double>(acc, v);
        else acc = std::max<long double>(acc, v);
      }
      if (op == ::ferry::ReduceOp::kAvg) { acc /= world; mag /= world; }
      const double ref = static_cast<double>(acc);
      hc.ref[i] = ref;
      if (op == ::ferry::ReduceOp::kMin || op == ::ferry::ReduceOp::kMax) hc.tol[i] = 0;  // exact
      else if (op == ::ferry::ReduceOp::kProd) hc.tol[i] = (rel + acc_eps + partial_prod_eps) * std::fabs(ref);
      else hc.tol[i] = rel * std::fabs(ref) + (acc_eps + partial_sum_eps) * static_cast<double>(mag);
    }
  }
  return hc;
}

}  // namespace ferry::testing
