// Rank-rows combine (EpLayout::kRankRows): the caller already summed each
// row's local experts, so the send half only copies every row received from
// another rank back to that rank's stage (bf16, at the token's slot there); the
// receive half sums, per token and in rank order (fp32), the rows of the ranks
// it went to, reading its own rank's row straight from expert_outputs.
// Protocol: NOTE [EP epochs] (ready words per chunk, kCombineConsumed reuse).
#include "ep/ep_device.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

// Stage of home rank h for rows from rank r: [r][T][H] bf16 at slot token_slot[t][h]
// of r (the row's index among h's rows at r, NOTE [EP rank rows]).
__device__ __forceinline__ size_t stage_index(const Params& p, int from_rank, int slot) {
  return size_t(from_rank) * p.max_tokens + slot;
}

__global__ void __launch_bounds__(kThreads, 1) rank_rows_combine_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineSend);
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ int64_t source_offset[kMaxRanks];
  load_recv_counts(p, token_count, max_token_count);
  if (threadIdx.x < p.world_size) source_offset[threadIdx.x] = p.source_offsets[threadIdx.x];
  // Homes must be done reading the rows this rank sent them last time (the barrier inside also
  // publishes the counts above to the block).
  if (wait_all_peers(p, kCombineConsumed, epoch - 1, kPhaseEpCombine)) {
    const int lane = threadIdx.x & 31;
    const size_t row_bytes = size_t(p.hidden) * 2;
    const uint8_t* outputs = static_cast<const uint8_t*>(p.expert_outputs);
    // Items (remote source j, slot, chunk), interleaved across the W - 1 other
    // ranks; the own rank's rows are read in place by the receive half, so they
    // are no items at all (skipping them in a cursor over all W ranks left every
    // block of one parity idle at W = 2: item i goes to block i % grid).
    const int remote = p.world_size - 1;
    const int total = remote * max_token_count * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < total; item += loop.stride) {
      const int c = item % p.num_chunks, pair = item / p.num_chunks;
      const int j = pair % remote, slot = pair / remote;
      const int s = j < p.rank ? j : j + 1;
      if (slot >= token_count[s]) continue;
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      const uint8_t* src = outputs + size_t(source_offset[s] + slot) * row_bytes + offset;
      const size_t index = stage_index(p, p.rank, slot);
      uint8_t* dst = p.combine_stage.at(s) + index * row_bytes + offset;
      copy_units<kSendUnroll>(src, dst, units, lane);
      __syncwarp();  // the warp's stores, then the chunk's ready word
      if (lane == 0) device::st_release_sys(p.combine_ready.at(s) + index * p.num_chunks + c, epoch);
    }
  }
  finish_launch(p, kCombineSend, epoch, -1);
}

__global__ void __launch_bounds__(kThreads, 1) rank_rows_combine_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int W = p.world_size, H = p.hidden;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (*p.layout_error == 0) {
    const uint8_t* own_rows = static_cast<const uint8_t*>(p.expert_outputs) + size_t(p.source_offsets[p.rank]) * row_bytes;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      // Lanes r != rank wait for the row of rank r (all at once).
      int ok = 1;
      if (slot >= 0 && lane != p.rank)
        ok = device::wait_flag_geq(p.combine_ready.at(p.rank) + stage_index(p, lane, slot) * p.num_chunks + c, epoch,
                                   p.wait, lane, kPhaseEpCombine);
      if (!__all_sync(0xffffffffu, ok)) break;
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      auto row_of = [&](int r) {
        const int s = __shfl_sync(0xffffffffu, slot, r);
        // NOTE [EP own rows first]: own row t is token t (the ballot above skips tokens with none here).
        return (r == p.rank ? own_rows + size_t(p.own_rows_first ? t : s) * row_bytes
                            : p.combine_stage.at(p.rank) + stage_index(p, r, s) * row_bytes) + offset;
      };
      sum_rank_rows(ranks, row_of, out, chunk_units, lane);
    }
  }
  finish_launch(p, kCombineRecv, epoch, kCombineConsumed);
}

}  // namespace

void load_rank_rows_combine_kernels() {
  load_kernels(rank_rows_combine_send_kernel, rank_rows_combine_recv_kernel);
}

void launch_rank_rows_combine_send(const Params& p, cudaStream_t stream) {
  rank_rows_combine_send_kernel<<<p.num_blocks, kThreads, 0, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_rank_rows_combine_recv(const Params& p, cudaStream_t stream) {
  launch_receive_grid(rank_rows_combine_recv_kernel, p, 0, stream);
}

}  // namespace ferry::ep
