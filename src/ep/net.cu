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
// (a peer of this node, or this rank), else this rank's outbox for it.
__device__ __forceinline__ uint8_t* dispatch_target(const NetParams& np, int peer, int parity) {
  const int W = np.p.world_size;
  if (dev::is_nvlink_peer(np.w, peer))
    return reinterpret_cast<uint8_t*>(np.w.nvl_peer[peer]) + dispatch_in(np.lay, W, parity, np.p.rank);
  return reinterpret_cast<uint8_t*>(np.w.local) + dispatch_out(np.lay, W, parity, peer);
}
__device__ __forceinline__ uint8_t* combine_target(const NetParams& np, int home, int parity) {
  const int W = np.p.world_size;
  if (dev::is_nvlink_peer(np.w, home))
    return reinterpret_cast<uint8_t*>(np.w.nvl_peer[home]) + combine_in(np.lay, W, parity, np.p.rank);
  return reinterpret_cast<uint8_t*>(np.w.local) + combine_out(np.lay, W, parity, home);
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

// ---------------------------------------------------------------- dispatch

// Chunk c of token t into its record at every destination it picked.
template <bool kQuantize>
__device__ void pack_chunk(const NetParams& np, int t, int c, int lane, uint8_t** dst, float** dst_scales,
                           int parity) {
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size, K = p.topk, Le = p.local_experts;
  const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
  const int e = lane < K ? p.token_expert[size_t(t) * K + lane] : -1;
  const int pos = lane < K ? p.pos_in_expert[size_t(t) * K + lane] : -1;
  const float w = (lane < K && p.with_weights) ? p.topk_weights[size_t(t) * K + lane] : 1.f;
  const unsigned dst_mask = __ballot_sync(0xffffffffu, slot >= 0);
  if (dst_mask == 0) return;
  int num_dst = 0;
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    const int s = __shfl_sync(0xffffffffu, slot, r);
    uint8_t* record = dispatch_target(np, r, parity) + lay.header_bytes + size_t(s) * lay.record_bytes;
    if (c == 0) {  // the routing record, once per token (a slot travels whole)
      int32_t* meta = reinterpret_cast<int32_t*>(record);
      const bool here = e >= 0 && e / Le == r;
      if (lane == 0) meta[0] = t;
      if (lane < K) {
        meta[1 + lane] = here ? e % Le : -1;
        meta[1 + K + lane] = pos;
        reinterpret_cast<float*>(meta)[1 + 2 * K + lane] = w;
      }
    }
    if (lane == 0) {
      dst[num_dst] = record + lay.row_offset;
      if (p.fp8_out) dst_scales[num_dst] = reinterpret_cast<float*>(record + lay.scales_offset);
    }
    ++num_dst;
  }
  __syncwarp();
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();  // dst / dst_scales are rewritten by the next item
}

template <bool kQuantize>
__global__ void __launch_bounds__(kThreads, 1) net_dispatch_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  // NOTE [EP across nodes: reuse] (1, 2): the slots of this parity were read in call epoch - 2.
  const bool ok = wait_all_ranks(np, kSigDispatchConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpDispatch);
  // A bad expert id in this call's routing: send nothing (EpBuffer reports it).
  const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
  if (ok && !bad) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride)
      pack_chunk<kQuantize>(np, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp], warp_scales[warp],
                            parity);
  }
  if (!arrive_last(p, kDispatchSend)) return;
  if (ok) {
    for (int d = 0; d < W; ++d) {
      uint8_t* box = dispatch_target(np, d, parity);
      int32_t* header = reinterpret_cast<int32_t*>(box);
      const int tokens = bad ? 0 : p.send_token_count[d];
      if (threadIdx.x == 0) header[kHeaderTokens] = tokens;
      for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
        header[kHeaderCounts + e] = bad ? 0 : p.send_expert_count[e];
      if (dev::is_nvlink_peer(w, d)) {
        __syncthreads();  // the header, then the signal (the records: before every block's arrival)
        if (threadIdx.x == 0) dev::signal(w, d, kSigDispatchData, 1);
      } else {
        dev::put_with_signal(w, d, dispatch_in(lay, W, parity, p.rank), dispatch_out(lay, W, parity, d),
                             lay.header_bytes + size_t(tokens) * lay.record_bytes, kSigDispatchData, 1);
      }
    }
  }
  advance_epoch(p, kDispatchSend, epoch);
}

__global__ void __launch_bounds__(kThreads, 1) net_dispatch_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, Le = p.local_experts, K = p.topk, E = p.num_experts;
  const int mine = p.rank * Le;  // this rank's first global expert
  extern __shared__ __align__(16) uint8_t recv_smem[];
  int64_t* offsets = reinterpret_cast<int64_t*>(recv_smem);  // [Le + 1]: first row of each local expert, then the end
  int32_t* totals = reinterpret_cast<int32_t*>(offsets + Le + 1);  // [E]: rows per expert from all sources
  int32_t* base = totals + E;                                      // [W][Le]: first row of (source, local expert)
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ int64_t needed[kMaxRanks];
  const bool ok = wait_all_ranks(np, kSigDispatchData, epoch, kPhaseEpDispatch);
  if (ok) {
    auto header = [&](int s) {
      return reinterpret_cast<const volatile int32_t*>(dev::recv_ptr(w, s) + dispatch_in(lay, W, parity, s));
    };
    for (int i = threadIdx.x; i < E; i += kThreads) {
      int total = 0;
      for (int s = 0; s < W; ++s) total += header(s)[kHeaderCounts + i];
      totals[i] = total;
    }
    for (int i = threadIdx.x; i < W * Le; i += kThreads) {
      const int s = i / Le, le = i % Le;
      int before = 0;
      for (int q = 0; q < s; ++q) before += header(q)[kHeaderCounts + mine + le];
      base[i] = before;
    }
    if (threadIdx.x < W) token_count[threadIdx.x] = header(threadIdx.x)[kHeaderTokens];
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp < W) {  // warp r: the rows rank r needs (every rank sees every rank's overflow)
      const int64_t rows = warp_expert_offsets(
          p, Le, lane, [&](int le) { return int64_t(totals[warp * Le + le]); },
          [&](int le, int64_t start) {
            if (warp == p.rank) offsets[le] = start;
          });
      if (lane == 0) {
        needed[warp] = rows;
        if (warp == p.rank) offsets[Le] = rows;
      }
    } else if (warp == kWarps - 1) {
      const int most = __reduce_max_sync(0xffffffffu, lane < W ? token_count[lane] : 0);
      if (lane == 0) max_token_count = most;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < W * Le; i += kThreads) base[i] += int32_t(offsets[i % Le]);
    // NOTE [EP overflow is collective]: the lowest rank whose output would overflow.
    if (blockIdx.x == 0 && threadIdx.x == 0 && !p.low_latency) {
      for (int r = 0; r < W; ++r) {
        if (needed[r] <= p.capacity_rows) continue;
        if (p.status->code == kEpOk) {
          p.status->value = needed[r];
          p.status->rank = r;
          __threadfence_system();
          p.status->code = kEpTooManyRows;
        }
        break;
      }
    }
    __syncthreads();
    const bool overflow = !p.low_latency && needed[p.rank] > p.capacity_rows;
    if (blockIdx.x == 0) {
      if (!overflow) {
        for (int le = threadIdx.x; le <= Le; le += kThreads) p.expert_offsets[le] = offsets[le];
        for (int le = threadIdx.x; le < Le; le += kThreads) p.expert_counts[le] = totals[mine + le];
      }
      // An overflowed rank received nothing: its combine sends nothing.
      if (threadIdx.x < W) p.recv_token_count[threadIdx.x] = overflow ? 0 : token_count[threadIdx.x];
    }
    if (!overflow) {
      __shared__ uint8_t* warp_rows[kWarps][kMaxTopk];
      const int elem = p.fp8_out ? 1 : 2;
      const size_t out_row_bytes = size_t(p.hidden) * elem;
      const int groups = p.hidden / kScaleBlock;
      const ItemCursor cursor{W, max_token_count, p.num_chunks};
      const ItemLoop loop(p);
      for (int item = loop.first; item < cursor.total(); item += loop.stride) {
        int s, slot, c;
        if (!cursor.decode(item, token_count, s, slot, c)) continue;
        const size_t index = size_t(s) * p.max_tokens + slot;
        const uint8_t* record =
            reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, s)) + dispatch_in(lay, W, parity, s) +
            lay.header_bytes + size_t(slot) * lay.record_bytes;
        const volatile int32_t* meta = reinterpret_cast<const volatile int32_t*>(record);
        int row = -1;
        if (lane < K) {
          const int le = meta[1 + lane];
          if (le >= 0) row = base[s * Le + le] + meta[1 + K + lane];
          if (c == 0) {  // the token's bookkeeping, once
            if (row >= 0 && p.with_weights)
              p.out_weights[row] = reinterpret_cast<const volatile float*>(meta)[1 + 2 * K + lane];
            p.slot_rows[index * K + lane] = row;
          }
        }
        if (lane == 0 && c == 0) p.slot_src_token[index] = meta[0];
        const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
        int num_rows = 0;
        for (unsigned m = rows_mask; m != 0; m &= m - 1) {
          const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
          if (lane == 0) warp_rows[warp][num_rows] = p.out_tokens + size_t(r) * out_row_bytes;
          ++num_rows;
        }
        __syncwarp();
        const int begin = chunk_begin(p, c), end = chunk_end(p, c);
        copy_units_to_rows<kRecvUnroll, true>(record + lay.row_offset + size_t(begin) * elem, warp_rows[warp], num_rows,
                                         size_t(begin) * elem, (end - begin) * elem / 16, lane);
        if (p.fp8_out) {
          const volatile float* scales = reinterpret_cast<const volatile float*>(record + lay.scales_offset);
          for (unsigned m = rows_mask; m != 0; m &= m - 1) {
            const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
            for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32)
              p.out_scales[size_t(r) * groups + g] = scales[g];
          }
        }
        __syncwarp();
      }
    }
  }
  if (!arrive_last(p, kDispatchRecv)) return;
  // Every block is done reading the inboxes: the sources may reuse them (NOTE [EP across nodes: reuse]).
  if (ok && threadIdx.x < W) dev::signal(w, static_cast<int>(threadIdx.x), kSigDispatchConsumed, 1);
  advance_epoch(p, kDispatchRecv, epoch);
}

size_t net_dispatch_recv_smem_bytes(int world_size, int local_experts, int num_experts) {
  return sizeof(int64_t) * (local_experts + 1) + sizeof(int32_t) * (num_experts + size_t(world_size) * local_experts);
}
static_assert(sizeof(int64_t) * (kMaxExperts + 1) + sizeof(int32_t) * 2 * kMaxExperts + 1024 <= kDefaultSmemBytes,
              "no shared-memory opt-in needed");

// ---------------------------------------------------------------- combine

constexpr int kUnroll = kCombineUnroll;

__global__ void __launch_bounds__(kThreads, 1) net_combine_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, K = p.topk, H = p.hidden;
  const size_t row_bytes = size_t(H) * 2;
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
  __shared__ float warp_weights[kWarps][kMaxTopk];
  if (threadIdx.x == 0) {
    max_token_count = 0;
    for (int s = 0; s < W; ++s) {
      token_count[s] = p.recv_token_count[s];
      max_token_count = max(max_token_count, token_count[s]);
    }
  }
  // NOTE [EP across nodes: reuse] (3): the slots of this parity were read in combine epoch - 2.
  const bool ok = wait_all_ranks(np, kSigCombineConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpCombine);
  if (ok) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint8_t* outputs = static_cast<const uint8_t*>(p.expert_outputs);
    const ItemCursor cursor{W, max_token_count, p.num_chunks};
    const ItemLoop loop(p);
    for (int item = loop.first; item < cursor.total(); item += loop.stride) {
      int s, slot, c;
      if (!cursor.decode(item, token_count, s, slot, c)) continue;
      const size_t index = size_t(s) * p.max_tokens + slot;
      const int row = lane < K ? p.slot_rows[index * K + lane] : -1;
      const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
      int num_rows = 0;
      for (unsigned m = rows_mask; m != 0; m &= m - 1) {
        const int k = __ffs(m) - 1;
        if (lane == k) {
          warp_rows[warp][num_rows] = outputs + size_t(row) * row_bytes;
          warp_weights[warp][num_rows] = p.with_weights ? p.out_weights[row] : 1.f;
        }
        ++num_rows;
      }
      __syncwarp();
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      uint8_t* dst = combine_target(np, s, parity) + size_t(slot) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (int j = 0; j < num_rows; ++j)
          accumulate_units<false>(acc, warp_rows[warp][j] + offset, warp_weights[warp][j], base, chunk_units, lane);
        store_units(dst, acc, base, chunk_units, lane);
      }
      __syncwarp();  // warp_rows / warp_weights are rewritten by the next item
    }
  }
  if (!arrive_last(p, kCombineSend)) return;
  if (ok) {
    for (int s = 0; s < W; ++s) {
      const size_t bytes = size_t(token_count[s]) * row_bytes;
      if (dev::is_nvlink_peer(w, s) || bytes == 0) {
        __syncthreads();
        if (threadIdx.x == 0) dev::signal(w, s, kSigCombineData, 1);
      } else {
        dev::put_with_signal(w, s, combine_in(lay, W, parity, p.rank), combine_out(lay, W, parity, s), bytes,
                             kSigCombineData, 1);
      }
    }
  }
  advance_epoch(p, kCombineSend, epoch);
}

__global__ void __launch_bounds__(kThreads, 1) net_combine_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, H = p.hidden;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  const bool ok = wait_all_ranks(np, kSigCombineData, epoch, kPhaseEpCombine);
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (ok && *reinterpret_cast<const volatile int32_t*>(p.layout_error) == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      // Lane r: where rank r's partial of this chunk is.
      const uint8_t* partial = slot >= 0 ? reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, lane)) +
                                               combine_in(lay, W, parity, lane) + size_t(slot) * row_bytes + offset
                                         : nullptr;
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (unsigned m = ranks; m != 0; m &= m - 1) {  // rank order: identical rounding everywhere
          const int r = __ffs(m) - 1;
          const uint8_t* src = reinterpret_cast<const uint8_t*>(
              __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(partial), r));
          accumulate_units<true>(acc, src, 1.f, base, chunk_units, lane);
        }
        store_units(out, acc, base, chunk_units, lane);
      }
    }
  }
  if (!arrive_last(p, kCombineRecv)) return;
  // Every block is done reading the partials: the expert ranks may reuse them.
  if (ok && threadIdx.x < W) dev::signal(w, static_cast<int>(threadIdx.x), kSigCombineConsumed, 1);
  advance_epoch(p, kCombineRecv, epoch);
}

}  // namespace

void load_net_kernels() {
  cudaFuncAttributes attributes;
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_send_kernel<true>));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_send_kernel<false>));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_recv_kernel));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_combine_send_kernel));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_combine_recv_kernel));
  load_layout_kernel();
}

void launch_net_dispatch_send(const NetParams& np, cudaStream_t stream) {
  const auto kernel =
      np.p.fp8_out && !np.p.fp8_in ? net_dispatch_send_kernel<true> : net_dispatch_send_kernel<false>;
  kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_dispatch_recv(const NetParams& np, cudaStream_t stream) {
  const size_t smem = net_dispatch_recv_smem_bytes(np.p.world_size, np.p.local_experts, np.p.num_experts);
  net_dispatch_recv_kernel<<<np.p.num_blocks, kThreads, smem, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_combine_send(const NetParams& np, cudaStream_t stream) {
  net_combine_send_kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_combine_recv(const NetParams& np, cudaStream_t stream) {
  net_combine_recv_kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
