// Programmatic dependent launch, host side (the device side: allow_dependent_launch
// and wait_prior_grid in include/ferry/device/sync.cuh). Shared by the EP halves
// (NOTE [Overlapped halves and free SMs], src/ep/ep_device.cuh) and the one-shot
// AllReduce kernels (NOTE [AllReduce launches], src/allreduce/allreduce_device.cuh).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "ferry/cuda_check.hpp"

namespace ferry {

// Compute capability 9.0+: where the griddepcontrol instructions exist.
inline bool supports_dependent_launch(int device) {
  int major = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream
// serialization when `dependent`: it may start before the grid ahead of it on
// the stream ends (it must then wait for it before touching that grid's work).
// The launch's own error is thrown, never an earlier one of the caller's (as
// cudaGetLastError after <<<>>> would report).
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      bool dependent, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = dependent ? 1 : 0;
  config.attrs = &attribute;
  config.numAttrs = 1;
  FERRY_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace ferry
