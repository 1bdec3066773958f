// Host side of the shim's GPU tests (test_shim_gpu.cpp): inputs every rank can
// regenerate for every rank, NCCL's datatypes in host memory, and a reference
// reduction computed on the host. Written against nccl.h and CUDA's fp16/bf16
// headers only, never ferry's: the reference must not share code with what it
// checks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace shim_test {

inline size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
inline bool is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}
inline const char* type_name(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclInt32: return "int32";
    case ncclInt64: return "int64";
    case ncclFloat16: return "fp16";
    case ncclBfloat16: return "bf16";
    case ncclFloat32: return "fp32";
    case ncclFloat64: return "fp64";
    default: return "other";
  }
}
inline const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMin: return "min";
    case ncclMax: return "max";
    case ncclAvg: return "avg";
    default: return "user-op";
  }
}

// The datatypes and ops of the shim's policy: ferry takes these (NOTE in docs/nccl-shim.md).
inline bool ferry_type(ncclDataType_t t) {
  return t == ncclFloat32 || t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat64 || t == ncclInt32 ||
         t == ncclInt64;
}
inline bool ferry_op(ncclRedOp_t op) { return op == ncclSum || op == ncclProd || op == ncclMin || op == ncclMax || op == ncclAvg; }

// One element as a double (every value the tests make is exact in each type).
inline double load(ncclDataType_t t, const uint8_t* p) {
  switch (t) {
    case ncclInt8: return static_cast<int8_t>(*p);
    case ncclInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ncclInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ncclFloat16: { __half v; std::memcpy(&v, p, 2); return __half2float(v); }
    case ncclBfloat16: { __nv_bfloat16 v; std::memcpy(&v, p, 2); return __bfloat162float(v); }
    case ncclFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    default: { double v; std::memcpy(&v, p, 8); return v; }
  }
}
inline void store(ncclDataType_t t, uint8_t* p, double x) {
  switch (t) {
    case ncclInt8: { int8_t v = static_cast<int8_t>(static_cast<int64_t>(x)); std::memcpy(p, &v, 1); break; }
    case ncclInt32: { int32_t v = static_cast<int32_t>(static_cast<int64_t>(x)); std::memcpy(p, &v, 4); break; }
    case ncclInt64: { int64_t v = static_cast<int64_t>(x); std::memcpy(p, &v, 8); break; }
    case ncclFloat16: { __half v = __float2half_rn(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case ncclBfloat16: { __nv_bfloat16 v = __float2bfloat16_rn(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case ncclFloat32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); break; }
    default: std::memcpy(p, &x, 8); break;
  }
}
// Integers wrap like the device's two's complement arithmetic.
inline double wrap(ncclDataType_t t, double x) {
  if (t == ncclInt8) return static_cast<int8_t>(static_cast<uint8_t>(static_cast<int64_t>(x) & 0xff));
  if (t == ncclInt32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(x) & 0xffffffff));
  return x;
}

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s element i of the input tagged `tag`: integer-valued, so sums,
// products, min and max are exact in every type whatever the order of the
// reduction; products use {-2,-1,1,2} so they stay small and exact.
inline double input_value(uint64_t seed, int rank, uint64_t tag, size_t i, ncclRedOp_t op) {
  const uint64_t h = mix(seed ^ mix(tag * 1315423911ull + static_cast<uint64_t>(rank)) ^ (i * 0x2545f4914f6cdd1dull));
  if (op == ncclProd) {
    static const double kProd[4] = {-2, -1, 1, 2};
    return kProd[h & 3];
  }
  return static_cast<double>(static_cast<int64_t>(h % 17) - 8);
}

inline std::vector<uint8_t> make_input(ncclDataType_t t, size_t count, uint64_t seed, int rank, uint64_t tag,
                                       ncclRedOp_t op) {
  std::vector<uint8_t> bytes(count * type_size(t));
  for (size_t i = 0; i < count; ++i) store(t, bytes.data() + i * type_size(t), input_value(seed, rank, tag, i, op));
  return bytes;
}

// out = op over ranks of every rank's input(tag), element i. `premul`: the
// scalar of a ncclRedOpCreatePreMulSum op (op must be ncclSum then).
inline double reference(ncclDataType_t t, ncclRedOp_t op, int nranks, uint64_t seed, uint64_t tag, size_t i,
                        double premul = 1.0) {
  double acc = 0;
  for (int r = 0; r < nranks; ++r) {
    // The value as stored in the type (exact here, but keep the rounding explicit).
    uint8_t buf[8];
    store(t, buf, input_value(seed, r, tag, i, op));
    const double v = load(t, buf) * premul;
    if (r == 0) { acc = v; continue; }
    switch (op) {
      case ncclProd: acc = wrap(t, acc * v); break;
      case ncclMin: acc = std::min(acc, v); break;
      case ncclMax: acc = std::max(acc, v); break;
      default: acc = wrap(t, acc + v); break;  // sum, avg
    }
  }
  if (op == ncclAvg) acc = is_float(t) ? acc / nranks : std::trunc(acc / nranks);  // NCCL: integers truncate
  uint8_t buf[8];
  store(t, buf, acc);
  return load(t, buf);
}

// How far a result may be from the reference: exact, except avg (the division
// may round differently from the host's, e.g. a pre-multiplication by 1/n).
inline double tolerance(ncclDataType_t t, ncclRedOp_t op, double ref) {
  if (op != ncclAvg) return 0;
  const double a = std::fabs(ref);
  switch (t) {
    case ncclFloat16: return 4e-3 * a + 4e-3;
    case ncclBfloat16: return 3e-2 * a + 3e-2;
    case ncclFloat32: return 1e-6 * a + 1e-6;
    case ncclFloat64: return 1e-12 * a + 1e-12;
    default: return 1;  // an integer division of a sum NCCL may round either way
  }
}

// Bytes that poison an output before a call: NaN in every float type, and in
// the integer types a value no reduction of the inputs above can produce.
inline int poison_byte(ncclDataType_t t) { return is_float(t) ? 0xff : 0x7f; }

// "" when `got` (count elements of t) matches the reference of `tag`, else the
// first mismatches.
inline std::string check(ncclDataType_t t, ncclRedOp_t op, int nranks, uint64_t seed, uint64_t tag,
                         const std::vector<uint8_t>& got, size_t count, double premul = 1.0) {
  size_t bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < count; ++i) {
    const double want = reference(t, op, nranks, seed, tag, i, premul);
    const double have = load(t, got.data() + i * type_size(t));
    if (!(std::fabs(have - want) <= tolerance(t, op, want))) {  // NaN fails
      if (bad < 4) msg << (bad ? ", " : "") << "[" << i << "] " << have << " != " << want;
      ++bad;
    }
  }
  if (bad == 0) return "";
  msg << " (" << bad << " of " << count << " wrong)";
  return msg.str();
}

}  // namespace shim_test
