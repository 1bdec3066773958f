// The cross-node EP path: what its dispatch (net_dispatch.cu) and combine
// (net_combine.cu) kernels share: the protocol, the window's box offsets, the
// waits and the last-block election.
// EP dispatch and combine across nodes (an EpBuffer whose ranks span nodes):
// the "direct" path, every rank writing straight to every destination rank,
// through the device API (include/ferry/device/channel.cuh) on one
// ferry::Window. Same results as the intranode kernels (dispatch.cu,
// combine.cu): rows of one expert contiguous, ordered by source rank then
// source token; combine sums the partials of the token's ranks in rank order.
//
// NOTE [EP across nodes]
// Window (net_params.hpp, NetLayout): dispatch inbox/outbox and combine
// inbox/outbox, each [2 parity][W peer] slots; call n of a kind uses parity n & 1.
//  - dispatch send (pack): the layout kernel (layout.cu) gives each token its
//    slot at every destination rank. Warps write, per (token, chunk of columns)
//    and destination, the token's record at its slot: the routing record (the
//    token index at the source, per k the local expert at the destination or
//    -1, its index among the source's tokens of that expert, the weight), then
//    the row in the dispatch type (rows.cuh: bf16, bf16 quantized to fp8 with
//    its scales, or fp8 input with its scales). Records for a destination of
//    this node (NVLink, or this rank itself) go straight into its inbox through
//    DeviceWindow::nvl_peer; those for another node into this rank's outbox.
//    The last block to finish writes each destination's header (its token
//    count, then this rank's rows for every one of the E experts) and sends:
//    put_with_signal(header + used records, outbox -> the destination's inbox
//    slot of this source) for another node, signal for this node; word
//    kSigDispatchData. Every destination gets its header and signal, also with
//    no tokens (and with a bad expert id in this rank's routing: nothing sent).
//  - dispatch receive: every block waits for kSigDispatchData >= n from every
//    source, reads the headers (recv_ptr: the device window, or the pinned
//    landing buffer for a source of another node), computes the experts'
//    offsets (alignment padding, low-latency slabs) and each source's first row
//    per expert, then scatters the records (rows, scales, weights) it owns, and
//    remembers per (source, slot) the output row of each k and the source token
//    (for combine). From the headers every rank also knows every rank's rows,
//    so a high-throughput overflow (max_recv_rows) is seen by every rank, which
//    records it naming the lowest such rank (NOTE [EP overflow is collective]);
//    the overflowed rank writes nothing. The last block signals
//    kSigDispatchConsumed to every source.
//  - combine send: per received (source, slot, chunk), the weighted sum of the
//    token's expert outputs at this rank (fp32, bf16 on the wire) at the slot's
//    row of the home's combine inbox (NVLink: directly; else this rank's
//    outbox); the last block sends them (put_with_signal of the used rows, or a
//    signal) with kSigCombineData.
//  - combine receive: every block waits for kSigCombineData >= m from every
//    rank, then out[t] = sum over the ranks the token went to, in rank order
//    (fp32), of the partial at that rank's slot for t; zeros for a token with no
//    expert. The last block signals kSigCombineConsumed to every expert rank.
// Every wait goes through wait_signal (the timeout primitive). No block waits
// for another block of its grid (the last block is elected by a counter), so a
// grid needs no co-residency; EpBuffer keeps the grids small enough that the
// ranks sharing one GPU fit on it together (their blocks wait for each other).
//
// NOTE [EP across nodes: reuse]
// Signal words only grow: after a rank's n-th call of a kind, its word at every
// peer holds n (NOTE [Window signals]); epochs are device counters (NOTE [EP
// epochs]), so low-latency calls need no host bookkeeping and capture in graphs.
//  1. Dispatch inbox of (destination d, source s, parity n & 1): s writes it in
//     call n (NVLink stores or a put). d reads it in its receive n and then
//     signals kSigDispatchConsumed (its n-th). s's send n waits for that word
//     >= n - 2 from every d before its first store: the slot of the same parity
//     was last read in call n - 2. Call n - 1 uses the other parity, because d
//     may still be reading n - 1's predecessor when s sends n - 1 (a dispatch
//     may follow a dispatch directly, NOTE [EpBuffer call order]).
//  2. Dispatch outbox of (s, d, parity): the proxy copies a put's source
//     asynchronously (staging, or the NIC reading GPU memory), so the outbox
//     is busy until d has the data. d's consumed signal of call n - 2 comes
//     after d saw the data signal of n - 2, which the proxy issues after the
//     data (NOTE [Network signals]); so the wait in (1) also frees the outbox of
//     parity n & 1.
//  3. Combine inbox/outbox of (home h, expert rank d, parity m & 1): the same
//     argument with kSigCombineData / kSigCombineConsumed and the combine count
//     m (several combines per dispatch): d's combine send m waits for h's
//     consumed >= m - 2 from every h.
//  4. The local arrays (layout, slot rows, output) follow the stream order and
//     the call-order rules of the API, as inside a node.
// Every rank makes the same calls in the same order, so the n of a kind agrees
// everywhere.
#pragma once

#include "ep/kernel_common.cuh"
#include "ep/net_params.hpp"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"

namespace ferry::ep {
namespace {

namespace dev = ::ferry::device;

__device__ __forceinline__ size_t dispatch_in(const NetLayout& l, int W, int parity, int source) {
  return l.dispatch_in + (size_t(parity) * W + source) * l.dispatch_slot;
}
__device__ __forceinline__ size_t dispatch_out(const NetLayout& l, int W, int parity, int destination) {
  return l.dispatch_out + (size_t(parity) * W + destination) * l.dispatch_slot;
}
__device__ __forceinline__ size_t combine_in(const NetLayout& l, int W, int parity, int expert_rank) {
  return l.combine_in + (size_t(parity) * W + expert_rank) * l.combine_slot;
}
__device__ __forceinline__ size_t combine_out(const NetLayout& l, int W, int parity, int home) {
  return l.combine_out + (size_t(parity) * W + home) * l.combine_slot;
}

// Where this rank writes its dispatch slot for `peer`: the peer's inbox itself
// (a peer of this node, or this rank), else this rank's outbox for it, in the
// window's send view (dev::send_view: the puts take SourceIn::kSendView).
__device__ __forceinline__ uint8_t* dispatch_target(const NetParams& np, int peer, int parity) {
  const int W = np.p.world_size;
  if (dev::is_nvlink_peer(np.w, peer))
    return reinterpret_cast<uint8_t*>(np.w.nvl_peer[peer]) + dispatch_in(np.lay, W, parity, np.p.rank);
  return reinterpret_cast<uint8_t*>(dev::send_view(np.w)) + dispatch_out(np.lay, W, parity, peer);
}
__device__ __forceinline__ uint8_t* combine_target(const NetParams& np, int home, int parity) {
  const int W = np.p.world_size;
  if (dev::is_nvlink_peer(np.w, home))
    return reinterpret_cast<uint8_t*>(np.w.nvl_peer[home]) + combine_in(np.lay, W, parity, np.p.rank);
  return reinterpret_cast<uint8_t*>(dev::send_view(np.w)) + combine_out(np.lay, W, parity, home);
}

// Thread t < W waits until signal word `index` from rank t reaches `target`
// (nothing for target 0). Block scope; false for the whole block when a wait
// failed (timeout or abort: the host throws).
__device__ bool wait_all_ranks(const NetParams& np, uint32_t index, uint64_t target, int32_t phase) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int peer = static_cast<int>(threadIdx.x);
  if (peer < np.p.world_size && target > 0 && !dev::wait_signal(np.w, peer, index, target, phase)) failed = 1;
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
}

// Block scope: true in the last block of the grid to get here (every other
// block's stores are made visible at system scope before it arrives).
__device__ bool arrive_last(const Params& p, EpochKind kind) {
  __syncthreads();
  __shared__ int last;
  if (threadIdx.x == 0) {
    __threadfence_system();
    last = atomicAdd(&p.epochs->blocks_done[kind], 1u) == gridDim.x - 1;
    __threadfence();
  }
  __syncthreads();
  return last != 0;
}

// The last block: the launch of `kind` is complete (NOTE [EP epochs]).
__device__ void advance_epoch(const Params& p, EpochKind kind, uint64_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0) {
    p.epochs->blocks_done[kind] = 0;
    (&p.epochs->dispatch_sent)[kind] = epoch;
    __threadfence();
  }
}


}  // namespace
}  // namespace ferry::ep
