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
__device__ __forceinline__ bool is_aligned16(const void* ptr) {
  return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

}  // namespace ferry::device
