// CUDA runtime / driver check macros that throw ferry::CudaError.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "ferry/error.hpp"

namespace ferry {

// Why cudaGetDeviceCount found no usable GPU, in words a user can act on. CUDA
// says "driver version is insufficient" when there is no driver at all (a
// machine without GPUs), so that case names the likely cause first.
inline std::string no_gpu_reason(cudaError_t status, int devices) {
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice || (status == cudaSuccess && devices == 0))
    return std::string("this machine shows no NVIDIA GPU (no GPU, or no NVIDIA driver; CUDA: ") +
           (status == cudaSuccess ? "0 devices" : cudaGetErrorName(status)) +
           "); on a machine without GPUs, scripts/test.sh runs the tests (GPU tests report SKIPPED)";
  return std::string("CUDA could not list the GPUs: ") + cudaGetErrorName(status) + " (" +
         cudaGetErrorString(status) + ")";
}

}  // namespace ferry

#define FERRY_CUDA_CHECK(expr)                                                          \
  do {                                                                                  \
    cudaError_t ferry_cuda_err_ = (expr);                                               \
    if (ferry_cuda_err_ != cudaSuccess) {                                               \
      FERRY_THROW(::ferry::CudaError, "CUDA call `" #expr "` failed: "                  \
                                          << cudaGetErrorName(ferry_cuda_err_) << " ("  \
                                          << cudaGetErrorString(ferry_cuda_err_) << ")"); \
    }                                                                                   \
  } while (0)

// Driver results are reported by number: the library does not link libcuda.
#define FERRY_CU_CHECK(expr)                                                            \
  do {                                                                                  \
    CUresult ferry_cu_err_ = (expr);                                                    \
    if (ferry_cu_err_ != CUDA_SUCCESS) {                                                \
      FERRY_THROW(::ferry::CudaError, "CUDA driver call `" #expr "` failed: CUresult "  \
                                          << static_cast<int>(ferry_cu_err_));          \
    }                                                                                   \
  } while (0)

// After a kernel launch: report launch-configuration errors at the call site.
#define FERRY_CUDA_CHECK_LAUNCH() FERRY_CUDA_CHECK(cudaGetLastError())
