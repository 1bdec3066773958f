// The receive side both cross-node dispatch paths share (internode_dispatch.cu, the direct path;
// internode_hier_dispatch.cu, the hierarchical one): place_dispatch_records, which reads every source's
// box header and places the records this rank owns into its expanded rows. The protocol it follows
// (boxes, ranges, relays) is in internode_common.cuh.
#pragma once

#include "ep/ep_trace.cuh"
#include "ep/internode_common.cuh"

namespace ferry::ep {
namespace {

// NOTE [EP trace] phase sums of the receive's items (FERRY_EP_TRACE builds only; reported by the direct path's
// receive kernel): 0 from the caller's wait to the warp's item loop (headers, offsets), 1 an item's meta loads
// (until its output rows are known), 2 the rest of the item (its row and scales loaded and stored).
FERRY_EP_PHASE_DEFINE(g_phase_place_records)

// The receive side both cross-node dispatch paths share (direct:
// internode_dispatch.cu; hierarchical: internode_hier_dispatch.cu), after the caller's wait
// for every source: reads every source's header (its token count and its rows
// for all E experts), publishes this rank's expert offsets and counts (a
// high-throughput overflow is seen by every rank, NOTE [EP overflow is
// collective]), then places the records it owns. `inbox(s)`: where source s's
// dispatch slot of this call's parity is read. Dynamic shared memory:
// net_dispatch_recv_smem_bytes. host_inboxes (some inboxes lie in host memory:
// a staged window's landing): block 0 copies every source's header into device
// memory for the others (NOTE [EP across nodes: one waiter per grid]); `epoch`
// is the relay's target. pipelined: records are placed by range as they land
// (NOTE [EP across nodes: pipelined ranges]), not after the whole box.
// kPipelined is a template parameter, not a branch: low latency's code stays what it was before ranges
// (session 15: low latency across nodes over sm read 1-3% slower with the runtime branches).
template <bool kPipelined, typename Inbox>
__device__ void place_dispatch_records(const NetParams& np, Inbox inbox, uint64_t epoch, bool host_inboxes) {
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size, Le = p.local_experts, K = p.topk, E = p.num_experts;
  const int mine = p.rank * Le;  // this rank's first global expert
  extern __shared__ __align__(16) uint8_t recv_smem[];
  int64_t* offsets = reinterpret_cast<int64_t*>(recv_smem);  // [Le + 1]: first row of each local expert, then the end
  int32_t* totals = reinterpret_cast<int32_t*>(offsets + Le + 1);  // [E]: rows per expert from all sources
  int32_t* base = totals + E;                                      // [W][Le]: first row of (source, local expert)
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ int64_t needed[kMaxRanks];
  const int header_words = kHeaderCounts + E;
  FERRY_EP_PHASE_CLOCK(phase_clock);
  if (host_inboxes) {
    uint64_t* ready = np.relay.flags + kRelayDispatchHeaders;
    if (blockIdx.x == 0) {
      for (int i = threadIdx.x; i < W * header_words; i += kThreads)
        np.relay.headers[i] = reinterpret_cast<const volatile int32_t*>(inbox(i / header_words))[i % header_words];
      __syncthreads();
      if (threadIdx.x == 0) device::st_release_sys(ready, epoch);
    } else {
      // Blocks only read after the wait, and block 0's wait is already done: a
      // failure here can only be the abort, which the host reports.
      if (threadIdx.x == 0) device::wait_flag_geq(ready, epoch, p.wait, p.rank, kPhaseEpDispatch);
      __syncthreads();
    }
  }
  auto header = [&](int s) {
    return host_inboxes ? reinterpret_cast<const volatile int32_t*>(np.relay.headers + size_t(s) * header_words)
                         : reinterpret_cast<const volatile int32_t*>(inbox(s));
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
    int first = loop.first, stride = loop.stride;
    __shared__ int landed[kWarps][kMaxRanks];  // ranges this warp saw published, per source
    if constexpr (kPipelined) {
      if (take_relay_warp(p, first, stride)) {
        relay_ranges(np, token_count, int(lay.range_records), kSigDispatchRange, kRelayRanges, epoch,
                     kPhaseEpDispatch);
        first = cursor.total();
      }
      if (lane < kMaxRanks) landed[warp][lane] = 0;
      __syncwarp();
    }
    FERRY_EP_PHASE_MARK(g_phase_place_records, 0, phase_clock);
    for (int item = first; item < cursor.total(); item += stride) {
      int s, slot, c;
      if (!cursor.decode(item, token_count, s, slot, c)) continue;
      if constexpr (kPipelined) {
        const int ok = lane != 0 || wait_range_landed(np.relay.flags + kRelayRanges + s, epoch,
                                                      slot / int(lay.range_records), landed[warp][s], p.wait, s,
                                                      kPhaseEpDispatch);
        if (!__shfl_sync(0xffffffffu, ok, 0)) break;  // aborted: the host reports it
        __syncwarp();  // lane 0's acquire before the warp reads the range
      }
      const size_t index = size_t(s) * p.max_tokens + slot;
      const uint8_t* record =
          reinterpret_cast<const uint8_t*>(inbox(s)) + lay.header_bytes + size_t(slot) * lay.record_bytes;
      const volatile int32_t* meta = reinterpret_cast<const volatile int32_t*>(record);
      const int begin = chunk_begin(p, c), end = chunk_end(p, c);
      const uint8_t* src = record + lay.row_offset + size_t(begin) * elem;
      const int units = (end - begin) * elem / 16;
      // NOTE [EP receive: loads in one round trip]: a record in host memory (a landing over UCX shared
      // memory or tcp) is a PCIe round trip away, several microseconds under load. Every load of the item
      // whose address is known goes out before any result is used: the meta words (local expert, slot,
      // weight, source token), a scale a lane and, in low latency, the first kRecvUnroll units of the row.
      // Loaded one after the other (a slot once its expert was read, a weight once its row was known, the
      // row after the meta, the scales after the row) they were up to six round trips an item (session 46
      // c2's trace: the low-latency dispatch over sm placed its 1024 items, 1 a warp, in 11-49 us). 2x H200
      // as 2 virtual nodes, aligned, base / this (c4): low latency fp8 0.951 over sm, 0.930 over cuda_ipc,
      // bf16 0.984 / 0.972. High throughput keeps its row's loads after the meta: early, they read 1.03-1.05x
      // slower over cuda_ipc (c3; the kernel spills at 64 registers a thread), and its rows are many rounds long.
      constexpr int kEarly = kPipelined ? 1 : kRecvUnroll;
      uint4 first_units[kEarly];
      if constexpr (!kPipelined) load_units<kEarly, true>(src, units, lane, first_units);
      int le = -1, expert_slot = 0, src_token = 0;
      float weight = 0.0f;
      if (lane < K) {
        le = meta[1 + lane];
        expert_slot = meta[1 + K + lane];
        if (c == 0 && p.with_weights) weight = reinterpret_cast<const volatile float*>(meta)[1 + 2 * K + lane];
      }
      if (lane == 0 && c == 0) src_token = meta[0];
      const volatile float* scales = reinterpret_cast<const volatile float*>(record + lay.scales_offset);
      const int first_group = begin / kScaleBlock, end_group = end / kScaleBlock;
      const float scale = p.fp8_out && first_group + lane < end_group ? scales[first_group + lane] : 0.0f;
      const int row = le >= 0 ? base[s * Le + le] + expert_slot : -1;
      if (lane < K && c == 0) {  // the token's bookkeeping, once
        if (row >= 0 && p.with_weights) record_token_weight(p, row, index * K + lane, weight);  // NOTE [EP slot weights]
        p.slot_rows[index * K + lane] = row;
      }
      if (lane == 0 && c == 0) p.slot_src_token[index] = src_token;
      const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
      FERRY_EP_PHASE_MARK(g_phase_place_records, 1, phase_clock);
      int num_rows = 0;
      for (unsigned m = rows_mask; m != 0; m &= m - 1) {
        const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
        if (lane == 0) warp_rows[warp][num_rows] = p.out_tokens + size_t(r) * out_row_bytes;
        ++num_rows;
      }
      __syncwarp();
      if constexpr (!kPipelined)
        store_units_to_rows<kEarly>(warp_rows[warp], num_rows, size_t(begin) * elem, units, lane, first_units);
      constexpr int kFirst = kPipelined ? 0 : 32 * kEarly;  // units the early loads carried
      if (units > kFirst)  // the rest (high throughput: the whole row)
        copy_units_to_rows<kRecvUnroll, true>(src + size_t(kFirst) * 16, warp_rows[warp], num_rows,
                                              size_t(begin) * elem + size_t(kFirst) * 16, units - kFirst, lane);
      if (p.fp8_out) {
        for (unsigned m = rows_mask; m != 0; m &= m - 1) {
          const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
          float* out_scales = p.out_scales + size_t(r) * groups;
          if (first_group + lane < end_group) out_scales[first_group + lane] = scale;
          for (int g = first_group + 32 + lane; g < end_group; g += 32) out_scales[g] = scales[g];  // > 4096 columns
        }
      }
      __syncwarp();
      FERRY_EP_PHASE_MARK(g_phase_place_records, 2, phase_clock);
    }
  }
}

__host__ __device__ constexpr size_t net_dispatch_recv_smem_bytes(int world_size, int local_experts, int num_experts) {
  return sizeof(int64_t) * (local_experts + 1) + sizeof(int32_t) * (num_experts + size_t(world_size) * local_experts);
}

}  // namespace
}  // namespace ferry::ep
