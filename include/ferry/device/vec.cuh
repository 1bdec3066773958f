// 16-byte vector loads and stores, the unit every data path moves.
#pragma once

#include <cstdint>

namespace ferry::device {

__device__ __forceinline__ uint4 load16(const void* ptr) {
  return *reinterpret_cast<const uint4*>(ptr);
}
// For memory no other agent writes while the kernel runs (inputs): may use the
// read-only path.
__device__ __forceinline__ uint4 load16_readonly(const void* ptr) {
  return __ldg(reinterpret_cast<const uint4*>(ptr));
}
__device__ __forceinline__ void store16(void* ptr, const uint4& value) {
  *reinterpret_cast<uint4*>(ptr) = value;
}
// Bypasses L1 (peer memory written by other GPUs in the same kernel).
__device__ __forceinline__ uint4 load16_volatile(const void* ptr) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}
__device__ __forceinline__ void store16_volatile(void* ptr, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
// One warp: drops from L2, without writing them back, the whole 128-byte lines inside [begin, end) (lane-strided;
// lines the range only partly covers stay). For memory whose contents are dead once read (a consumed staging
// buffer): the lines a peer wrote then never cost HBM write bandwidth. The caller orders its reads of the range
// before this (a __syncwarp after them).
__device__ __forceinline__ void discard_l2_lines(const void* begin, const void* end, int lane) {
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + 127) & ~uintptr_t(127);
  const uintptr_t last = reinterpret_cast<uintptr_t>(end) & ~uintptr_t(127);
  for (uintptr_t line = first + uintptr_t(lane) * 128; line < last; line += 32 * 128)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
}

__device__ __forceinline__ bool is_aligned16(const void* ptr) {
  return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

}  // namespace ferry::device
