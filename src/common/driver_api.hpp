// CUDA driver functions used by the library, resolved at run time through the
// runtime's entry-point query, so libferry.so does not link libcuda.so.1 and
// loads (and runs its CPU paths) on machines without a GPU driver.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "ferry/error.hpp"

namespace ferry::driver {

// The driver function `name` as of CUDA `version` (e.g. 12000), through the
// runtime's entry-point query; throws CudaError when the driver lacks it. Also
// for ferry-bench's probes (bench/stream_memops.hpp), which link no libcuda either.
template <typename Fn>
Fn resolve(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();
    FERRY_THROW(CudaError, "CUDA driver function " << name << " is not available ("
                                                   << cudaGetErrorString(err) << ")");
  }
  return reinterpret_cast<Fn>(fn);
}

// Each throws CudaError when the driver or the function is unavailable.
CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
CUresult ctx_get_current(CUcontext* ctx);
CUresult ctx_get_device(CUdevice* device);
// True when CUDA loads modules lazily (CUDA_MODULE_LOADING=LAZY, the default
// since CUDA 12.2); false when eager or when the driver cannot say.
bool lazy_module_loading();
const char* error_name(CUresult result);

}  // namespace ferry::driver
