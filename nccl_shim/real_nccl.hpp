// The real NCCL behind libferry_nccl.so: loaded with dlopen, its entry points
// resolved by name (NOTE [Real NCCL]).
#pragma once

#include <nccl.h>

#include <string>

#include "ferry_nccl_optional.h"  // generated: FERRY_NCCL_OPTIONAL_FUNCTIONS, FERRY_NCCL_HAS_*
#ifdef FERRY_NCCL_HAS_DEVICE_API
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // 2.30's nccl_device/utility.h has an unused static helper
#include <nccl_device.h>  // host functions of NCCL's device API that take a communicator
#pragma GCC diagnostic pop
#endif

// Every function of nccl.h the shim exports: X(name). Those newer NCCLs added
// are in only where the nccl.h built against declares them (the generated
// ferry_nccl_optional.h, from CMake's checks: torch's NCCL 2.28.3 lacks ncclCommRevoke).
#define FERRY_NCCL_FUNCTIONS(X) FERRY_NCCL_BASE_FUNCTIONS(X) FERRY_NCCL_OPTIONAL_FUNCTIONS(X)
#define FERRY_NCCL_BASE_FUNCTIONS(X)                                                                            \
  X(ncclMemAlloc) X(ncclMemFree) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig)                 \
  X(ncclCommInitRank) X(ncclCommInitAll) X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort)                \
  X(ncclCommSplit) X(ncclGetErrorString) X(ncclGetLastError) X(ncclCommGetAsyncError) X(ncclCommCount)          \
  X(ncclCommCuDevice) X(ncclCommUserRank) X(ncclCommRegister) X(ncclCommDeregister) X(ncclRedOpCreatePreMulSum) \
  X(ncclRedOpDestroy) X(ncclReduce) X(ncclBcast) X(ncclBroadcast) X(ncclAllReduce) X(ncclReduceScatter)         \
  X(ncclAllGather) X(ncclAlltoAll) X(ncclGather) X(ncclScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart)       \
  X(ncclGroupEnd)

namespace ferry::nccl_shim {

// NOTE [Real NCCL]
// The shim defines every nccl.h function itself (so LD_PRELOAD or linking it
// puts it in front of NCCL) and calls the real one through pointers from
// dlopen(FERRY_NCCL_LIBRARY, else the NCCL found at build time, else
// libnccl.so.2) and dlsym on that handle, which resolves inside that library,
// not back to the shim. A function the loaded NCCL lacks stays null: calling it
// returns ncclInvalidUsage with a message naming it.
struct RealNccl {
#define FERRY_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  FERRY_NCCL_FUNCTIONS(FERRY_NCCL_POINTER)
#undef FERRY_NCCL_POINTER
  void* handle = nullptr;
  std::string path;   // what was loaded
  std::string error;  // why nothing was (empty when loaded)
};

// Loaded once, on first use (thread-safe).
const RealNccl& real_nccl();

}  // namespace ferry::nccl_shim
