// CUDA runtime / driver check macros that throw ferry::CudaError.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "ferry/error.hpp"

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
