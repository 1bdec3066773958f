// ferry-bench ep --expert-pass (ep_expert_pass.cu): the expert GEMM's stand-in between dispatch and combine.
#pragma once

#include <cuda_runtime.h>

#include "ferry/ep.hpp"

namespace ferry::bench {

// Rewrites in place every bf16 expert-output row the combine of `result` reads: the rows of each local expert
// (expanded), or every row (rank rows: [0, source_offsets[world_size])).
void launch_expert_pass(const DispatchResult& result, EpLayout layout, int world_size, void* expert_outputs,
                        int hidden, cudaStream_t stream);

}  // namespace ferry::bench
