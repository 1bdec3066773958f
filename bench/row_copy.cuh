// The row copy the probes time (ferry-bench nvlink, ferry-bench pcie): the loop shape of
// the EP kernels' row copies (src/ep/dispatch.cu), so a probe measures the pattern they use;
// bench code only sees the public API.
#pragma once

#include <cstdint>

#include "ferry/device/vec.cuh"

namespace ferry::bench {

constexpr int kUnroll = 8;

// Every 16-byte unit is loaded once and stored to each of `num_dst` rows.
__device__ __forceinline__ void warp_copy(const uint8_t* src, uint8_t* const* dst, int num_dst, int bytes,
                                          int lane) {
  const int units = bytes / 16;
  for (int base = 0; base < units; base += 32 * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * 32 + lane;
      if (i < units) v[u] = device::load16(src + size_t(i) * 16);
    }
    for (int d = 0; d < num_dst; ++d) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * 32 + lane;
        if (i < units) device::store16(dst[d] + size_t(i) * 16, v[u]);
      }
    }
  }
}

}  // namespace ferry::bench
