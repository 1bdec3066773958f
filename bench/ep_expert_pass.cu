// ferry-bench ep --expert-pass: a stand-in for the expert GEMM between dispatch and combine.
//
// Without it the bench times (dispatch, combine) back to back on one static expert-output buffer, so what of
// that buffer is still in L2 when the combine reads it depends on how much the dispatch wrote: something no
// user sees, since a GEMM writes the expert outputs right before the combine. This pass rewrites, in place,
// every expert-output row the combine reads, as a GEMM's epilogue would (the values stay, so --check holds).
// It is timed as its own step, in neither the dispatch's nor the combine's figure.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ep_expert_pass.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench {
namespace {

// Range r of rows: [begin[r], begin[r] + count[r]) (expanded: one per local expert), or, with begin == nullptr,
// [0, *end) (rank rows: every row of every source). Each 16-byte unit is loaded and stored back.
__global__ void rewrite_rows_kernel(uint4* rows, int64_t units_per_row, const int64_t* begin, const int32_t* count,
                                    const int64_t* end) {
  const int r = static_cast<int>(blockIdx.y);
  const int64_t first = begin != nullptr ? begin[r] : 0;
  const int64_t num_rows = begin != nullptr ? count[r] : *end;
  const int64_t units = num_rows * units_per_row;
  uint4* base = rows + first * units_per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = base[i];
    base[i] = v;
  }
}

}  // namespace

void launch_expert_pass(const DispatchResult& result, EpLayout layout, int world_size, void* expert_outputs,
                        int hidden, cudaStream_t stream) {
  const int64_t units_per_row = int64_t(hidden) * 2 / 16;  // bf16 expert outputs
  const bool rank_rows = layout == EpLayout::kRankRows;
  // About one block per SM in all: rank rows one range over every SM, expanded a few blocks per expert.
  int device = 0, sms = 0;
  FERRY_CUDA_CHECK(cudaGetDevice(&device));
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned experts = static_cast<unsigned>(result.local_experts);
  const dim3 grid(rank_rows ? sms : std::max(1u, unsigned(sms) / experts), rank_rows ? 1 : experts);
  rewrite_rows_kernel<<<grid, 256, 0, stream>>>(static_cast<uint4*>(expert_outputs), units_per_row,
                                                rank_rows ? nullptr : result.expert_offsets,
                                                rank_rows ? nullptr : result.expert_counts,
                                                rank_rows ? result.source_offsets + world_size : nullptr);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::bench
