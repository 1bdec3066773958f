#include "common/driver_api.hpp"

#include <cuda_runtime.h>

#include "ferry/error.hpp"

namespace ferry::driver {

CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static Fn fn = resolve<Fn>("cuMemGetAddressRange", 3020);
  return fn(base, size, ptr);
}

CUresult ctx_get_current(CUcontext* ctx) {
  using Fn = CUresult (*)(CUcontext*);
  static Fn fn = resolve<Fn>("cuCtxGetCurrent", 4000);
  return fn(ctx);
}

CUresult ctx_get_device(CUdevice* device) {
  using Fn = CUresult (*)(CUdevice*);
  static Fn fn = resolve<Fn>("cuCtxGetDevice", 2000);
  return fn(device);
}

bool lazy_module_loading() {
  using Fn = CUresult (*)(CUmoduleLoadingMode*);
  try {
    static Fn fn = resolve<Fn>("cuModuleGetLoadingMode", 11070);
    CUmoduleLoadingMode mode{};
    return fn(&mode) == CUDA_SUCCESS && mode == CU_MODULE_LAZY_LOADING;
  } catch (const Error&) {
    return false;
  }
}

const char* error_name(CUresult result) {
  using Fn = CUresult (*)(CUresult, const char**);
  static Fn fn = nullptr;
  if (fn == nullptr) {
    try {
      fn = resolve<Fn>("cuGetErrorName", 6000);
    } catch (const Error&) {
      return "unknown CUDA driver error";
    }
  }
  const char* name = nullptr;
  return fn(result, &name) == CUDA_SUCCESS && name ? name : "unknown CUDA driver error";
}

}  // namespace ferry::driver
