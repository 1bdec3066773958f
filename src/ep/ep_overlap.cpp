// EpBuffer::dispatch() and combine(): both halves at once (ep_overlap.hpp), or
// one after the other on the caller's stream when overlapping is off
// (FERRY_EP_OVERLAP=0, or num_sms < 2).
#include "ep/ep_overlap.hpp"

#include "ep/ep_buffer_state.hpp"
#include "ep/validate.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace ep {

void SideStream::create() {
  int least = 0, greatest = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  FERRY_CUDA_CHECK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, greatest));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
}

void SideStream::destroy() noexcept {
  if (side) cudaStreamDestroy(side);
  if (fork) cudaEventDestroy(fork);
  if (ready) cudaEventDestroy(ready);
  if (join) cudaEventDestroy(join);
}

void SideStream::fork_from(cudaStream_t stream) {
  FERRY_CUDA_CHECK(cudaEventRecord(fork, stream));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
}

void SideStream::release(cudaStream_t stream) {
  FERRY_CUDA_CHECK(cudaEventRecord(ready, side));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
}

void SideStream::join_into(cudaStream_t stream) {
  FERRY_CUDA_CHECK(cudaEventRecord(join, side));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, join, 0));
}

}  // namespace ep

DispatchResult EpBuffer::dispatch(const TensorView& tokens, const TensorView& topk_idx,
                                  const TensorView& topk_weights, const TensorView& scales, cudaStream_t stream,
                                  const DispatchOptions& options) {
  State& st = *state_;
  if (!st.overlap) {
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    return dispatch_recv(handle, stream, options);
  }
  DispatchResult r;
  {
    // NOTE [Overlapped halves and free SMs] (ep_overlap.hpp)
    ep::OverlapScope overlap(st.grids, config_.num_sms, st.dispatch_recv_blocks, stream);
    st.streams.fork_from(stream);
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, st.streams.side, options);
    r = dispatch_recv(handle, stream, options);
    st.streams.join_into(stream);
  }
  // The count synchronization waits for both halves (after the join).
  if (config_.mode == EpMode::kHighThroughput && options.sync_counts) sync_counts(r, stream);
  return r;
}

void EpBuffer::combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out,
                       cudaStream_t stream) {
  // Checked before the send half so a bad `out` fails before any communication.
  const char* where = "EpBuffer::combine";
  state_->calls.check_latest_layout(where, handle);
  if (out.given())
    ep::validate_combine(config_, comm_.size(), TensorView{}, 0, out, handle.num_tokens);
  ep::check_on_device(where, "out", out, comm_.device());
  State& st = *state_;
  if (!st.overlap) {
    combine_send(expert_outputs, handle, stream);
    combine_recv(handle, out, stream);
    return;
  }
  ep::OverlapScope overlap(st.grids, config_.num_sms, st.combine_recv_blocks, stream);
  st.streams.fork_from(stream);
  combine_send(expert_outputs, handle, st.streams.side);
  combine_recv(handle, out, stream);
  st.streams.join_into(stream);
}

}  // namespace ferry
