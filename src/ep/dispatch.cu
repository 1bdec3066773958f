// Dispatch: the send half writes each token once into every destination rank it
// picked, straight into the output row of its first expert there, with its
// routing record; the receive half, chunk by chunk as they land, records where
// each token's rows are and copies the row to the token's further experts.
// Protocol: NOTE [EP epochs] in ep_device.cuh, NOTE [EP direct rows] here.
#include <algorithm>

#include "ep/destination_rows.cuh"
#include "ep/ep_device.cuh"
#include "ep/ep_trace.cuh"
#include "ep/routing_layout.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP trace] points. Send: 0 start, 1 block 0's layout done, 2 counts published,
// 3 every rank's counts seen, 4 destination rows computed, 5 items done; trace builds also 6 (a first layout
// pass) and 7-12 inside the second (layout_block's stamps).
// Receive: 0 start, 1 counts seen, 2 offsets computed, 3 items done, 4 (trace builds) the send grid complete.
FERRY_EP_TRACE_DEFINE(g_trace_dispatch_send)
FERRY_EP_TRACE_DEFINE(g_trace_dispatch_recv)

// One chunk of token t to every destination rank it picked: the data into the
// row of its first expert there, the routing record and the chunk's ready word.
// kQuantize: bf16 tokens sent as fp8 (a template parameter, not a branch: the
// quantizer and the copy loop in one kernel spilled registers under the 64 that
// a 1024-thread block allows; each alone does not).
template <bool kQuantize>
__device__ void send_chunk(const Params& p, const DestinationRows& rows, int t, int c, int lane, uint8_t** dst,
                           float** dst_scales, uint64_t epoch) {
  const int W = p.world_size, Le = p.local_experts;
  const TokenRouting routing = load_token_routing(p, t, lane);
  const int slot = routing.slot, e = routing.expert;
  const unsigned dst_mask = __ballot_sync(0xffffffffu, slot >= 0 && !rows.overflows(p, lane < W ? lane : 0));
  if (dst_mask == 0) return;
  const int H = p.hidden, groups = H / kScaleBlock;
  const size_t row_bytes = size_t(H) * (p.fp8_out ? 1 : 2);
  int num_dst = 0;
  uint64_t* my_ready = nullptr;  // lane d: ready word of destination d
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    const int s = __shfl_sync(0xffffffffu, slot, r);
    const size_t index = size_t(p.rank) * p.max_tokens + s;
    // The routing record goes with the first chunk only (NOTE [EP record once]).
    int32_t* record = reinterpret_cast<int32_t*>(p.stage_meta.at(r) + index * p.meta_bytes);
    if (c == 0) write_token_record(p, record, routing, t, r, lane);
    const bool here = e >= 0 && e / Le == r;
    const int first = __ffs(__ballot_sync(0xffffffffu, here)) - 1;  // the token's first expert on r
    const int first_expert = __shfl_sync(0xffffffffu, e, first) % Le;
    const int64_t row = rows.base[r * Le + first_expert] + __shfl_sync(0xffffffffu, routing.pos, first);
    if (lane == num_dst) my_ready = p.stage_ready.at(r) + index * p.num_chunks + c;
    if (lane == 0) {
      dst[num_dst] = p.peer_out_tokens.at(r) + row * row_bytes;
      if (p.fp8_out) dst_scales[num_dst] = p.peer_out_scales.at(r) + row * groups;
    }
    ++num_dst;
  }
  write_chunk_and_release<kQuantize>(p, t, c, lane, dst, dst_scales, num_dst, my_ready, epoch);
}

// NOTE [EP direct rows]
// A sender writes each token chunk straight into the destination's output row
// of the token's first expert there (rows of expert le from source s start at
// the expert's offset plus the rows of lower sources), so the receiver copies
// only the rows of a token's further experts on that rank. That needs every
// rank's counts before any data moves: each send launch first publishes its
// counts to every rank (double-buffered by epoch parity, tagged: NOTE [EP
// tagged counts] in destination_rows.cuh) and waits for everyone's. Seeing
// rank r's counts of epoch n also means r has entered dispatch n, so (by the
// API contract) it is done with its previous output, and (by stream order) its
// previous receive half, the reader of the routing records, has finished: the
// counts are the only reuse guard dispatch needs.
// NOTE [EP fused layout]
// When a call's tokens fit one block of the send kernel (at most
// max_fused_layout_tokens(E): 1024 with 256 experts, one thread per token, its
// per-warp masks in 40 KB of shared memory), block 0 of the send kernel
// computes the layout itself (layout_block over all the tokens, no grid
// barrier) before it publishes the counts, which saves the two layout kernels,
// their launch gaps and their round trips through global memory. The other
// blocks read the layout (token_slot, token_expert,
// pos_in_expert, layout_error) only after they acquired every rank's counts,
// this rank's included: block 0's threads write those after the layout's block
// barrier and a fence (write_counts, NOTE [EP tagged counts]), so the acquire
// makes the layout visible. The layout's shared
// memory and DestinationRows share the dynamic region (one is done before the
// other starts). kPairLayout: the layout takes one thread per (token, k) (NOTE [EP pair layout]), in a kernel of
// its own so that the other calls' kernels keep their code.
template <bool kQuantize, bool kPairLayout>
__global__ void __launch_bounds__(kThreads, 1) dispatch_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  extern __shared__ __align__(16) uint8_t send_smem[];
  DestinationRows& rows = *reinterpret_cast<DestinationRows*>(send_smem);
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 0);
  // publish_counts (destination_rows.cuh) is this block's work, kept inline here so
  // that this kernel's code stays as measured (the call reordered its PTX).
  if (blockIdx.x == 0) {
    if constexpr (kPairLayout) {
      uint32_t* layout_smem = reinterpret_cast<uint32_t*>(send_smem);
#ifdef FERRY_EP_TRACE
      layout_block_of_pairs(p, layout_smem);  // twice, as below
      __syncthreads();
      FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 6);
      layout_block_of_pairs(p, layout_smem, [](int point) { FERRY_EP_TRACE_POINT(g_trace_dispatch_send, point); });
#else
      layout_block_of_pairs(p, layout_smem);
#endif
      __syncthreads();  // the layout's counts and error flag, for every thread
    } else if (p.fuse_layout) {
#ifdef FERRY_EP_TRACE
      // Trace builds run the layout twice (it is idempotent) and stamp point 6 between: the second
      // pass's time (6 -> 1) against the first (0 -> 6) shows what a cold start costs.
      layout_block(p, reinterpret_cast<uint32_t*>(send_smem), 0, 1, fused_layout_block_tokens(p.num_tokens));
      __syncthreads();
      FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 6);
      layout_block(p, reinterpret_cast<uint32_t*>(send_smem), 0, 1, fused_layout_block_tokens(p.num_tokens),
                   [](int point) { FERRY_EP_TRACE_POINT(g_trace_dispatch_send, point); });
#else
      layout_block(p, reinterpret_cast<uint32_t*>(send_smem), 0, 1,
                   fused_layout_block_tokens(p.num_tokens));
#endif
      __syncthreads();  // the layout's counts and error flag, for every thread
    }
    FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 1);
    write_counts(p, epoch, /*own_first=*/false);  // a bad expert id: zeros, send nothing (EpBuffer reports it)
    FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 2);
  }
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  if (wait_counts_into_rows(p, epoch, kPhaseEpDispatch, rows)) {  // NOTE [EP counts into rows]
    FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 3);
    // After the wait: with a fused layout, this rank's counts guard the layout too.
    const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
    finish_destination_rows(p, rows);
    FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 4);
    if (blockIdx.x == 0 && threadIdx.x == 0) record_overflow(p, rows);
    if (!bad) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      const int items = p.num_tokens * p.num_chunks;
      const ItemLoop loop(p);
      for (int item = loop.first; item < items; item += loop.stride)
        send_chunk<kQuantize>(p, rows, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp],
                              warp_scales[warp], epoch);
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_dispatch_send, 5);
  FERRY_EP_TRACE_REPORT(g_trace_dispatch_send, "dispatch_send", p, epoch, 13);
  finish_launch(p, kDispatchSend, epoch, -1);
}

// The send kernel's dynamic shared memory: DestinationRows, or the fused layout's.
size_t dispatch_send_smem_bytes(const Params& p) {
  return std::max(sizeof(DestinationRows), fused_layout_send_smem_bytes(p));
}
// With its static arrays (warp_dst, warp_scales, the layout's and the waits'
// few words) the send kernel stays in the 48 KB a kernel gets without opting in.
static_assert(std::max(sizeof(DestinationRows), kFusedLayoutSmemBytes) + 2 * sizeof(void*) * kWarps * kMaxRanks +
                      sizeof(int32_t) * kWarps * kMaxRanks + 256 <=
                  kDefaultSmemBytes,
              "no shared-memory opt-in needed");

__global__ void __launch_bounds__(kThreads, 1) dispatch_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int W = p.world_size, Le = p.local_experts, K = p.topk, E = p.num_experts;
  extern __shared__ int32_t smem[];
  int32_t* base = smem;                                                       // [W][Le]
  int64_t* offsets = reinterpret_cast<int64_t*>(base + ((W * Le + 1) & ~1));  // [Le + 1]
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ bool overflow;
  FERRY_EP_TRACE_POINT(g_trace_dispatch_recv, 0);
  if (!wait_counts(p, epoch, kPhaseEpDispatch)) return;  // aborted: the host throws
  FERRY_EP_TRACE_POINT(g_trace_dispatch_recv, 1);

  // Rows of (source s, local expert le) start at the expert's offset plus the
  // rows of lower sources (the senders compute the same, NOTE [EP direct rows]).
  const int stride = E + W;
  const CountsView counts{p.counts.at(p.rank) + size_t(epoch & 1) * W * stride};
  const int mine = p.rank * Le;  // this rank's first global expert
  for (int le = threadIdx.x; le < Le; le += kThreads) {
    int run = 0;
    for (int s = 0; s < W; ++s) {
      base[s * Le + le] = run;
      run += counts[s * stride + mine + le];
    }
    offsets[le + 1] = run;  // this expert's rows, for now
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp == 0) {  // expert offsets by a warp scan; token counts per source
    // Each lane reads its expert's rows before it writes that expert's offset.
    const int64_t end = warp_expert_offsets(
        p, Le, lane, [&](int le) { return offsets[le + 1]; },
        [&](int le, int64_t start) { offsets[le] = start; });
    __syncwarp();
    if (lane == 0) offsets[Le] = end;
    const int count = lane < W ? counts[lane * stride + E + p.rank] : 0;
    if (lane < W) token_count[lane] = count;
    const int most = __reduce_max_sync(0xffffffffu, count);
    if (lane == 0) {
      max_token_count = most;
      overflow = !p.low_latency && end > p.capacity_rows;  // reported by the send half (NOTE [EP overflow is collective])
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < W * Le; i += kThreads) base[i] += int32_t(offsets[i % Le]);
  __syncthreads();
  FERRY_EP_TRACE_POINT(g_trace_dispatch_recv, 2);

  if (!overflow) {
    if (blockIdx.x == 0) {
      for (int le = threadIdx.x; le <= Le; le += kThreads) p.expert_offsets[le] = offsets[le];
      for (int le = threadIdx.x; le < Le; le += kThreads) {
        int rows = 0;
        for (int s = 0; s < W; ++s) rows += counts[s * stride + mine + le];
        p.expert_counts[le] = rows;
      }
      if (threadIdx.x < W) p.recv_token_count[threadIdx.x] = token_count[threadIdx.x];
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __shared__ uint8_t* warp_dst[kWarps][kMaxTopk];
    const int H = p.hidden;
    const int elem = p.fp8_out ? 1 : 2;
    const size_t out_row_bytes = size_t(H) * elem;
    const int groups = H / kScaleBlock;
    const ItemCursor cursor{W, max_token_count, p.num_chunks};
    const ItemLoop loop(p);
    for (int item = loop.first; item < cursor.total(); item += loop.stride) {
      int s, slot, c;
      if (!cursor.decode(item, token_count, s, slot, c)) continue;
      const size_t index = size_t(s) * p.max_tokens + slot;
      if (!warp_wait_chunk_and_record(p.stage_ready.at(p.rank) + index * p.num_chunks, c, epoch, s, p)) break;
      const int32_t* record = reinterpret_cast<const int32_t*>(p.stage_meta.at(p.rank) + index * p.meta_bytes);
      int row = -1;
      if (lane < K) {
        const int le = record[1 + lane];
        if (le >= 0) row = base[s * Le + le] + record[1 + K + lane];
        if (c == 0) {  // the token's bookkeeping, once
          if (row >= 0 && p.with_weights)  // NOTE [EP slot weights]
            record_token_weight(p, row, index * K + lane, reinterpret_cast<const float*>(record)[1 + 2 * K + lane]);
          p.slot_rows[index * K + lane] = row;
        }
      }
      if (lane == 0 && c == 0) p.slot_src_token[index] = record[0];
      const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
      // The sender wrote the first expert's row; copy it to the others.
      if (__popc(rows_mask) < 2) continue;
      const int first_row = __shfl_sync(0xffffffffu, row, __ffs(rows_mask) - 1);
      int num_rows = 0;
      for (unsigned m = rows_mask & (rows_mask - 1); m != 0; m &= m - 1) {
        const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
        if (lane == 0) warp_dst[warp][num_rows] = p.out_tokens + size_t(r) * out_row_bytes;
        ++num_rows;
      }
      __syncwarp();
      const int begin = chunk_begin(p, c), end = chunk_end(p, c);
      const uint8_t* first = p.out_tokens + size_t(first_row) * out_row_bytes;
      copy_units_to_rows<kRecvUnroll>(first + size_t(begin) * elem, warp_dst[warp], num_rows,
                                      size_t(begin) * elem, (end - begin) * elem / 16, lane);
      if (p.fp8_out) {
        for (unsigned m = rows_mask & (rows_mask - 1); m != 0; m &= m - 1) {
          const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
          for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32)
            p.out_scales[size_t(r) * groups + g] = p.out_scales[size_t(first_row) * groups + g];
        }
      }
      __syncwarp();
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_dispatch_recv, 3);
#ifdef FERRY_EP_TRACE
  wait_for_send_grid();  // trace builds: point 4 = the send grid complete (finish_launch waits again, at once)
  FERRY_EP_TRACE_POINT(g_trace_dispatch_recv, 4);
#endif
  FERRY_EP_TRACE_REPORT(g_trace_dispatch_recv, "dispatch_recv", p, epoch, 5);
  finish_launch(p, kDispatchRecv, epoch, -1);
}

constexpr size_t dispatch_recv_smem_bytes(int world_size, int local_experts) {
  return sizeof(int32_t) * (size_t(world_size) * local_experts + 2) + sizeof(int64_t) * (local_experts + 1);
}
static_assert(dispatch_recv_smem_bytes(1, kMaxExperts) <= kDefaultSmemBytes, "no shared-memory opt-in needed");

}  // namespace


// The send kernels by [quantize][pair layout] (NOTE [EP pair layout]).
using SendKernel = void (*)(Params);
constexpr SendKernel kSendKernels[2][2] = {{dispatch_send_kernel<false, false>, dispatch_send_kernel<false, true>},
                                           {dispatch_send_kernel<true, false>, dispatch_send_kernel<true, true>}};

void load_dispatch_kernels() {
  for (const auto& by_layout : kSendKernels) load_kernels(by_layout[0], by_layout[1]);
  load_kernels(dispatch_recv_kernel);
  load_staged_dispatch_kernels();
}

void launch_dispatch_send(const Params& p, cudaStream_t stream) {
  if (p.staged_rows) return launch_staged_dispatch_send(p, stream);
  const SendKernel kernel = kSendKernels[quantizes(p)][takes_pair_layout(p)];
  kernel<<<p.num_blocks, kThreads, dispatch_send_smem_bytes(p), stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_dispatch_recv(const Params& p, cudaStream_t stream) {
  if (p.staged_rows) return launch_staged_dispatch_recv(p, stream);
  launch_receive_grid(dispatch_recv_kernel, p, dispatch_recv_smem_bytes(p.world_size, p.local_experts), stream);
}

}  // namespace ferry::ep
