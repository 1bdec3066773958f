// ferry-bench ep --aligned (NOTE [EP bench: aligned ops], ep_align.hpp).
#include "ep_align.hpp"

#include "ferry/cuda_check.hpp"

namespace ferry::bench {

OpAligner::OpAligner(Communicator& comm) : allreduce_(comm, kCount * sizeof(float)) {
  FERRY_CUDA_CHECK(cudaMalloc(&buffer_, kCount * sizeof(float)));
  FERRY_CUDA_CHECK(cudaMemset(buffer_, 0, kCount * sizeof(float)));
  align(nullptr);  // connects and warms up outside any capture
  comm.synchronize(nullptr);
}

OpAligner::~OpAligner() { cudaFree(buffer_); }

void OpAligner::align(cudaStream_t stream) {
  allreduce_.run(buffer_, buffer_, kCount, DataType::kFloat32, ReduceOp::kSum, stream);
}

}  // namespace ferry::bench
