// Host-side element helpers for tests: 16-bit float conversions (round to nearest,
// ties to even) independent of the CUDA headers, and loads/stores of every
// ferry::DataType, so a host reference never depends on the code under test.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ferry/types.hpp"

namespace ferry::testing {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---- bfloat16: the upper half of a float32.
inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;  // round to nearest even (overflow correctly rounds to inf)
  return static_cast<uint16_t>(x >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// ---- IEEE binary16.
inline uint16_t float_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {
    // Below 2^-14: a subnormal half, in units of 2^-24. The scaling is exact and
    // nearbyint rounds ties to even in the default rounding mode.
    const float scaled = bits_float(a) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  uint32_t h = ((((a >> 23) - 127u + 15u) << 10) | ((a & 0x7fffffu) >> 13));
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent
  return static_cast<uint16_t>(sign | h);
}
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

// Rounds through the 16-bit type: the value a host reference must start from.
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }
inline float round_f16(float f) { return f16_to_float(float_to_f16(f)); }

// ---- elements of a ferry::DataType in host memory: a float type's value as a
// double (rounded to nearest even into the type), an int type's as int64.
inline bool is_int(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }
inline size_t elem_size(DataType t) {
  return (t == DataType::kFloat64 || t == DataType::kInt64) ? 8 : (t == DataType::kFloat32 || t == DataType::kInt32) ? 4 : 2;
}
inline void store_element(DataType t, uint8_t* p, double f, int64_t i) {
  switch (t) {
    case DataType::kFloat32: { float v = static_cast<float>(f); std::memcpy(p, &v, 4); break; }
    case DataType::kFloat64: std::memcpy(p, &f, 8); break;
    case DataType::kInt32: { int32_t v = static_cast<int32_t>(i); std::memcpy(p, &v, 4); break; }
    case DataType::kInt64: std::memcpy(p, &i, 8); break;
    case DataType::kBFloat16: { uint16_t v = float_to_bf16(static_cast<float>(f)); std::memcpy(p, &v, 2); break; }
    case DataType::kFloat16: { uint16_t v = float_to_f16(static_cast<float>(f)); std::memcpy(p, &v, 2); break; }
  }
}
inline double load_float(DataType t, const uint8_t* p) {
  if (t == DataType::kFloat64) { double v; std::memcpy(&v, p, 8); return v; }
  if (t == DataType::kFloat32) { float v; std::memcpy(&v, p, 4); return v; }
  uint16_t h; std::memcpy(&h, p, 2);
  return t == DataType::kBFloat16 ? bf16_to_float(h) : f16_to_float(h);
}
inline int64_t load_int(DataType t, const uint8_t* p) {
  if (t == DataType::kInt64) { int64_t v; std::memcpy(&v, p, 8); return v; }
  int32_t v; std::memcpy(&v, p, 4); return v;
}

}  // namespace ferry::testing
