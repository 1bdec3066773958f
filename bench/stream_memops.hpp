// Stream memory operations for the copy-engine probes (ce_allreduce_probe.cu, host_ce_probe.cu): a 64-bit write of
// a flag after the stream's work so far (the default flags put a memory barrier before it) and a wait until a flag
// holds at least a value. Resolved at run time by the library's driver::resolve (src/common/driver_api.hpp), so
// ferry-bench links no libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/driver_api.hpp"
#include "ferry/error.hpp"

namespace ferry::bench {

class StreamMemOps {
 public:
  StreamMemOps()
      : write_(driver::resolve<WriteValue64>("cuStreamWriteValue64", 12000)),
        wait_(driver::resolve<WaitValue64>("cuStreamWaitValue64", 12000)) {}
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
  static void check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) FERRY_THROW(CudaError, what << " failed (" << int(r) << ")");
  }
  WriteValue64 write_;
  WaitValue64 wait_;
};

}  // namespace ferry::bench
