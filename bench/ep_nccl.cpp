// ferry-bench ep: the NCCL all-to-all baseline (ep_nccl.hpp).
#include "ep_nccl.hpp"

#include <cstdint>

#include "ferry/cuda_check.hpp"

namespace ferry::bench::ep_detail {

#if FERRY_BENCH_HAVE_NCCL
namespace {

// ncclSend/ncclRecv between every pair of ranks (self included), moving the tokens
// src dispatches to dst times `token_bytes`; `reverse` sends them back.
void enqueue_all_to_all(ncclComm_t comm, const Traffic& traffic, int rank, size_t token_bytes, bool reverse,
                        AllToAllBuffers& buffers, cudaStream_t stream) {
  auto* by_dst = static_cast<uint8_t*>(buffers.by_dst.get());
  auto* by_src = static_cast<uint8_t*>(buffers.by_src.get());
  size_t dst_offset = 0;
  size_t src_offset = 0;
  FERRY_BENCH_NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < traffic.world; ++peer) {
    const size_t to_peer = static_cast<size_t>(traffic.at(traffic.tokens, rank, peer)) * token_bytes;
    const size_t from_peer = static_cast<size_t>(traffic.at(traffic.tokens, peer, rank)) * token_bytes;
    uint8_t* send = reverse ? by_src + src_offset : by_dst + dst_offset;
    uint8_t* recv = reverse ? by_dst + dst_offset : by_src + src_offset;
    const size_t send_bytes = reverse ? from_peer : to_peer;
    const size_t recv_bytes = reverse ? to_peer : from_peer;
    if (send_bytes > 0) FERRY_BENCH_NCCL_CHECK(ncclSend(send, send_bytes, ncclUint8, peer, comm, stream));
    if (recv_bytes > 0) FERRY_BENCH_NCCL_CHECK(ncclRecv(recv, recv_bytes, ncclUint8, peer, comm, stream));
    dst_offset += to_peer;
    src_offset += from_peer;
  }
  FERRY_BENCH_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace

NcclMeasurement measure_nccl(NcclCommunicator& nccl, Bootstrap& bootstrap, const Options& options,
                             const CaseInputs& in, DataType type, AllToAllBuffers& buffers, cudaStream_t stream,
                             const std::string& case_name, const std::function<void(cudaStream_t)>& before_each) {
  const int rank = bootstrap.rank();
  const size_t forward_bytes = bytes_per_token(type, options.hidden);
  const size_t reverse_bytes = bytes_per_token(DataType::kBFloat16, options.hidden);
  TimedSequence sequence;
  sequence.name = case_name;
  sequence.steps = {
      [&](cudaStream_t s) { enqueue_all_to_all(nccl.get(), in.traffic, rank, forward_bytes, false, buffers, s); },
      [&](cudaStream_t s) { enqueue_all_to_all(nccl.get(), in.traffic, rank, reverse_bytes, true, buffers, s); },
  };
  sequence.before_each = before_each;  // --aligned (NOTE [EP bench: aligned ops])
  for (const auto& step : sequence.steps) step(stream);  // connects the peers outside the capture
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  const SequenceTimingResult timed = time_sequence(sequence, stream, bootstrap, timing_options(options));
  return {timed.step_us[0], timed.step_us[1]};
}
#endif

}  // namespace ferry::bench::ep_detail
