// Stream memory operations for the copy-engine probes (ce_allreduce_probe.cu, host_ce_probe.cu): a 64-bit write of
// a flag after the stream's work so far (the default flags put a memory barrier before it) and a wait until a flag
// holds at least a value. Resolved at run time through the runtime's entry-point query, as the library resolves its
// driver functions (src/common/driver_api.hpp), so ferry-bench links no libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "bench_common.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench {

class StreamMemOps {
 public:
  StreamMemOps()
      : write_(entry<WriteValue64>("cuStreamWriteValue64")), wait_(entry<WaitValue64>("cuStreamWaitValue64")) {}
  void write(cudaStream_t stream, uint64_t* word, uint64_t value) const {
    check(write_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(word), value, 0),
          "cuStreamWriteValue64");
  }
  void wait_geq(cudaStream_t stream, uint64_t* word, uint64_t value) const {
    check(wait_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(word), value,
                CU_STREAM_WAIT_VALUE_GEQ),
          "cuStreamWaitValue64");
  }

 private:
  using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  using WaitValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  template <typename Fn>
  static Fn entry(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == nullptr)
      throw UsageError(std::string("the driver has no ") + name);
    return reinterpret_cast<Fn>(fn);
  }
  static void check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) FERRY_THROW(CudaError, what << " failed (" << int(r) << ")");
  }
  WriteValue64 write_;
  WaitValue64 wait_;
};

}  // namespace ferry::bench
