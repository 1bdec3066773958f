// ferry-bench ep: the baseline, an NCCL send/recv all-to-all moving the tokens
// each rank dispatches to each other rank (and back, combine's direction).
#pragma once

#include <functional>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "bench_common.hpp"
#include "ep_check.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/types.hpp"

namespace ferry::bench::ep_detail {

struct NcclMeasurement {
  double forward_us = 0;  // the dispatch payload, src -> dst
  double reverse_us = 0;  // the same tokens back in bf16 (combine's direction)
};

#if FERRY_BENCH_HAVE_NCCL
// Buffers of the all-to-all: `by_dst` holds what this rank sends (grouped by
// destination), `by_src` what it receives (grouped by source); bf16-sized.
struct AllToAllBuffers {
  DeviceBuffer by_dst;
  DeviceBuffer by_src;
  AllToAllBuffers(size_t send_bytes, size_t recv_bytes)
      : by_dst(std::max<size_t>(send_bytes, 256)), by_src(std::max<size_t>(recv_bytes, 256)) {}
};

NcclMeasurement measure_nccl(NcclCommunicator& nccl, Bootstrap& bootstrap, const Options& options,
                             const CaseInputs& in, DataType type, AllToAllBuffers& buffers, cudaStream_t stream,
                             const std::string& case_name, const std::function<void(cudaStream_t)>& before_each);
#endif

}  // namespace ferry::bench::ep_detail
