// The layout kernels of a call whose tokens span several layout blocks: the
// first runs layout_block() (routing_layout.cuh) on one block per kLayoutThreads
// tokens, the second adds the lower blocks' totals (NOTE [EP layout scan]).
// Neither waits on another block, so any number of free SMs will do.
#include <algorithm>

#include "ep/ep_trace.cuh"
#include "ep/routing_layout.cuh"
#include "ep/internode_params.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP trace] points (trace builds only), labelled with the epoch of the dispatch send they precede.
// layout: 0 start, 7-12 layout_block's stamps, 13 end; layout_add: 0 start, 1 end. With the spans each
// prints and the send kernel's, they show where a dispatch's layout step goes: inside these kernels or
// between them and the send kernel.
FERRY_EP_TRACE_DEFINE(g_trace_layout)
FERRY_EP_TRACE_DEFINE(g_trace_layout_add)

__global__ void __launch_bounds__(kLayoutThreads) layout_kernel(Params p) {
  extern __shared__ uint32_t smem[];
  FERRY_EP_TRACE_POINT(g_trace_layout, 0);
  layout_block(p, smem, blockIdx.x, gridDim.x, kLayoutThreads, [](int point) {
    static_cast<void>(point);  // read by trace builds only
    FERRY_EP_TRACE_POINT(g_trace_layout, point);
  });
  FERRY_EP_TRACE_POINT(g_trace_layout, 13);
  FERRY_EP_TRACE_REPORT(g_trace_layout, "layout", p, current_epoch(p, kDispatchSend), 14);
}

__global__ void __launch_bounds__(kLayoutThreads) layout_add_lower_blocks_kernel(Params p) {
  extern __shared__ int32_t base[];
  FERRY_EP_TRACE_POINT(g_trace_layout_add, 0);
  layout_add_lower_blocks(p, base, blockIdx.x, gridDim.x);
  FERRY_EP_TRACE_POINT(g_trace_layout_add, 1);
  FERRY_EP_TRACE_REPORT(g_trace_layout_add, "layout_add", p, current_epoch(p, kDispatchSend), 2);
}

}  // namespace

// The cross-node path runs the layout kernels behind kernels that wait on the
// proxy: loaded when the buffer is made (internode_params.hpp).
void load_layout_kernel() {
  load_kernels(layout_kernel, layout_add_lower_blocks_kernel);
}

void launch_layout(const Params& p, cudaStream_t stream) {
  const int blocks = std::max(1, (p.num_tokens + kLayoutThreads - 1) / kLayoutThreads);
  FERRY_CHECK(blocks <= kMaxLayoutBlocks, InvalidArgument,
              "the layout of " << p.num_tokens << " tokens needs " << blocks << " blocks, more than "
                               << kMaxLayoutBlocks);
  layout_kernel<<<blocks, kLayoutThreads, layout_smem_bytes(p.num_experts), stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
  if (blocks == 1) return;  // one block is the whole layout
  const size_t base_bytes = sizeof(int32_t) * size_t(p.num_experts + p.world_size);
  layout_add_lower_blocks_kernel<<<blocks, kLayoutThreads, base_bytes, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
