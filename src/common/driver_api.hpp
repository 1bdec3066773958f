// CUDA driver functions used by the library, resolved at run time through the
// runtime's entry-point query, so libferry.so does not link libcuda.so.1 and
// loads (and runs its CPU paths) on machines without a GPU driver.
#pragma once

#include <cuda.h>

namespace ferry::driver {

// Each throws CudaError when the driver or the function is unavailable.
CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
CUresult ctx_get_current(CUcontext* ctx);
CUresult ctx_get_device(CUdevice* device);
// True when CUDA loads modules lazily (CUDA_MODULE_LOADING=LAZY, the default
// since CUDA 12.2); false when eager or when the driver cannot say.
bool lazy_module_loading();
const char* error_name(CUresult result);

}  // namespace ferry::driver
