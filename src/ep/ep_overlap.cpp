// EpBuffer::dispatch() and combine(): both halves at once (ep_overlap.hpp), or
// one after the other when overlapping is off
// (FERRY_EP_OVERLAP=0, or num_sms < 2).
#include "ep/ep_overlap.hpp"

#include "ep/ep_buffer_state.hpp"
#include "ep/ep_args.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"

namespace ferry {

DispatchResult EpBuffer::dispatch(const TensorView& tokens, const TensorView& topk_idx,
                                  const TensorView& topk_weights, const TensorView& scales, cudaStream_t stream,
                                  const DispatchOptions& options) {
  State& st = *state_;
  if (!st.overlap) {
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    return dispatch_recv(handle, stream, options);
  }
  DispatchResult r;
  // NOTE [EP rank rows one grid]: where the SMs are few. On 2 H100s (T=4096, H=7168, top-8; session 18,
  // c4) the one grid of 8 SMs took 0.914 / 0.925 of the two grids' time (rank-rows dispatch bf16 / fp8),
  // but 1.050 / 1.086 at 16 SMs and 1.029 / 1.042 at 48 (24: 0.999 / 1.012).
  constexpr int kOneGridMaxSms = 8;
  // ep::quantizes(Params) before the Params exist (fp8 input needs dispatch_type fp8, ep_args.cpp).
  const bool quantizes = config_.dispatch_type == DataType::kFloat8E4M3 && tokens.dtype != DataType::kFloat8E4M3;
  if (st.path->dispatch_one_grid && !quantizes && config_.num_sms <= kOneGridMaxSms) {
    // Rank rows: the send half writes every row in place; the receive half's little work
    // goes into the send grid, which then has every SM (NOTE [EP rank rows one grid]).
    ep::OverlapScope one_grid(st.grids, config_.num_sms);
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    r = dispatch_recv(handle, stream, options);
  } else {
    // The receive grid starts while the send grid runs (NOTE [Overlapped halves and free SMs]).
    // Rank rows: the send half writes every row in place, the receive half is one
    // block that waits for the sources (NOTE [EP rank rows]).
    const int recv_blocks = st.path->dispatch_recv_blocks > 0 ? st.path->dispatch_recv_blocks : st.dispatch_recv_blocks;
    ep::OverlapScope overlap(st.grids, config_.num_sms, recv_blocks);
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    r = dispatch_recv(handle, stream, options);
  }
  // The count synchronization waits for both halves.
  if (config_.mode == EpMode::kHighThroughput && options.sync_counts) sync_counts(r, stream);
  return r;
}

void EpBuffer::combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out,
                       cudaStream_t stream) {
  // Both halves' arguments before the send half, so a bad `out` fails before any communication.
  check_combine(expert_outputs, handle, out);
  State& st = *state_;
  if (!st.overlap) {
    launch_combine_send_half(expert_outputs, stream);
    launch_combine_recv_half(out, stream);
    return;
  }
  // NOTE [EP combine one role] (combine.cu): one receive block, for the tokens with no row here.
  const bool one_role = st.combine_one_role;  // chosen when the buffer was built
  // NOTE [EP zero-copy combine]: the send half is one block of signals, done within microseconds; the receive
  // half does all the work on every SM (its last block starts when the send block has left its SM).
  const int recv_blocks = one_role ? 1 : st.base.zero_copy_combine ? config_.num_sms : st.combine_recv_blocks;
  ep::OverlapScope overlap(st.grids, config_.num_sms, recv_blocks, one_role);
  launch_combine_send_half(expert_outputs, stream, one_role ? const_cast<void*>(out.data) : nullptr);
  launch_combine_recv_half(out, stream);
}

}  // namespace ferry
