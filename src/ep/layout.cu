// The layout kernel: layout_block() (layout.cuh) on one block per
// kLayoutThreads tokens, all resident at once (they meet at a grid barrier).
#include <algorithm>

#include "ep/layout.cuh"
#include "ep/net_params.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

__global__ void __launch_bounds__(kLayoutThreads) layout_kernel(Params p) {
  extern __shared__ uint32_t smem[];
  layout_block(p, smem, blockIdx.x, gridDim.x);  // a failed barrier: the host throws
}

}  // namespace


void check_layout_fits(int max_tokens, int num_experts, int num_sms) {
  const int blocks = std::max(1, (max_tokens + kLayoutThreads - 1) / kLayoutThreads);
  int per_sm = 0;
  FERRY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, layout_kernel, kLayoutThreads,
                                                                  layout_smem_bytes(num_experts)));
  FERRY_CHECK(blocks <= per_sm * num_sms, NotSupported,
              "EpBuffer: the routing layout of " << max_tokens << " tokens needs " << blocks
                                                 << " resident blocks but this GPU holds " << per_sm * num_sms
                                                 << "; lower max_tokens_per_rank");
}

// The cross-node path runs the layout kernel behind kernels that wait on the
// proxy: loaded when the buffer is made (net_params.hpp).
void load_layout_kernel() {
  cudaFuncAttributes attributes;
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, layout_kernel));
}

void launch_layout(const Params& p, cudaStream_t stream) {
  const size_t smem = layout_smem_bytes(p.num_experts);
  const int blocks = std::max(1, (p.num_tokens + kLayoutThreads - 1) / kLayoutThreads);
  layout_kernel<<<blocks, kLayoutThreads, smem, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
