// The pcie probes' test data (host_probe.cu, host_peer_probe.cu): a word pattern per salt, a kernel that writes
// it and one that counts the words that differ from it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ferry::bench {
namespace {  // each probe's own copy of the kernels

__device__ __forceinline__ uint32_t host_pattern(int salt, size_t w) {
  return uint32_t(w * 2654435761u) ^ uint32_t(salt * 0x9E3779B9u);
}

__global__ void host_fill_kernel(uint32_t* words, size_t count, int salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    words[i] = host_pattern(salt, i);
}

__global__ void host_check_kernel(const uint32_t* words, size_t count, int salt, unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    bad += words[i] != host_pattern(salt, i);
  if (bad) atomicAdd(mismatches, bad);
}

}  // namespace
}  // namespace ferry::bench
