// Rank-rows combine with no copy (EpConfig::zero_copy_combine): each home rank pulls its tokens' rows from
// the ranks that hold them, over NVLink, while it sums them. Protocol: NOTE [EP zero-copy combine].
#include "ep/ep_device.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP zero-copy combine]
// The copying combine (rank_rows_combine.cu) pushes every row received from a peer back to that peer's stage
// and the home then sums its own row with the stage's: on few SMs the SMs move each peer row three times (load,
// remote store, load again), about 290 MB a rank at T=4096, H=7168 on 2 ranks, where pulling moves 175 MB with the
// same NVLink bytes (ferry-bench nvlink, 2x H200, 8 SMs: pull_sum2 292 GB/s against local_sum2 after a push).
// Here the caller writes its rows into this rank's part of the combine stage region (EpBuffer::combine_input;
// no peer ever pushes there on such a buffer), in the dispatch output's row order.
//  - Combine call n, send half (one block, whatever the split: combine() gives the receive half all num_sms
//    blocks, the last of which starts once this block has left its SM: for those microseconds one block more
//    than num_sms is resident): thread h (a peer) stores this rank's first row of source h
//    (source_offsets[h]) into h's word kCombineInputOffset + rank, then release-stores n into h's word
//    kCombineInputReady + rank. The caller's writes came before, in stream order, by earlier kernels; the
//    system-scope release is cumulative over them.
//  - Receive half: each block acquires every peer's ready word (>= n), reads the offsets, then sums each
//    token's rows in rank order, its own row local and each peer's row loaded from that peer (the same
//    sum_rank_rows as the copying combine: the same sums, bit for bit).
//  - Reuse: the receive half's last block stores n into every peer's kCombineConsumed + rank (as the copying
//    combine does), then waits until every peer's word here reads n: no home reads this rank's rows once its
//    combine is complete, so the caller may write them for the next call (after the next dispatch). The send
//    half needs no wait: the previous call's receive half ended so.
__global__ void __launch_bounds__(kThreads, 1) rank_rows_pull_combine_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineSend);
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  const int peer = static_cast<int>(threadIdx.x);
  if (blockIdx.x == 0 && peer < p.world_size && peer != p.rank) {
    const uint64_t first_row = uint64_t(p.source_offsets[peer]);
    *reinterpret_cast<volatile uint64_t*>(p.flags.region.at(peer) + kCombineInputOffset + p.rank) = first_row;
    p.flags.signal(peer, kCombineInputReady + p.rank, epoch);  // after the offset (same thread, release)
  }
  finish_launch(p, kCombineSend, epoch, -1);
}

__global__ void __launch_bounds__(kThreads, 1) rank_rows_pull_combine_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int W = p.world_size;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(p.hidden) * 2;
  __shared__ int failed;
  __shared__ const uint8_t* peer_rows[kMaxRanks];  // peer r's first row from this rank (as mapped here)
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  // A bad expert id in this call's routing: nothing was sent, nothing is written (the send half still tells the
  // peers where this rank's rows for them are). A failed wait (an abort) sums nothing; the host reports it.
  if (*p.layout_error == 0 &&
      p.flags.block_wait_row(kCombineInputReady, epoch, p.wait, kPhaseEpCombine, false, &failed)) {
    if (threadIdx.x < W) {
      const int r = static_cast<int>(threadIdx.x);
      const uint64_t first = r == p.rank ? uint64_t(p.source_offsets[r])
                                         : *reinterpret_cast<volatile uint64_t*>(p.flags.local(kCombineInputOffset + r));
      peer_rows[r] = p.combine_stage.at(r) + first * row_bytes;
    }
    __syncthreads();
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      auto row_of = [&](int r) {
        const int s = __shfl_sync(0xffffffffu, slot, r);
        // NOTE [EP own rows first]: own row t is token t (the ballot above skips tokens with none here).
        return peer_rows[r] + size_t(r == p.rank && p.own_rows_first ? t : s) * row_bytes + offset;
      };
      sum_rank_rows(ranks, row_of, out, chunk_units, lane);
    }
  }
  wait_for_send_grid();  // NOTE [Overlapped halves and free SMs]
  if (!arrive_last<false>(p, kCombineRecv)) return;
  p.flags.block_signal_row(kCombineConsumed, epoch, /*include_self=*/true);
  // NOTE [EP zero-copy combine]: every home done with this rank's rows before the call completes.
  wait_all_peers(p, kCombineConsumed, epoch, kPhaseEpCombine);  // a failed wait: the host reports the abort
  publish_epoch(p, kCombineRecv, epoch);
}

}  // namespace

void load_rank_rows_pull_combine_kernels() {
  load_kernels(rank_rows_pull_combine_send_kernel, rank_rows_pull_combine_recv_kernel);
}

void launch_rank_rows_pull_combine_send(const Params& p, cudaStream_t stream) {
  rank_rows_pull_combine_send_kernel<<<1, kThreads, 0, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_rank_rows_pull_combine_recv(const Params& p, cudaStream_t stream) {
  launch_receive_grid(rank_rows_pull_combine_recv_kernel, p, 0, stream);
}

}  // namespace ferry::ep
