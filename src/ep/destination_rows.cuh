// Where a source's rows go at each destination rank, from the counts every
// rank published before any data moves (NOTE [EP direct rows] in dispatch.cu):
// shared by the expanded dispatch (dispatch.cu) and the rank-rows one
// (rank_rows_dispatch.cu).
#pragma once

#include "ep/ep_device.cuh"
#include "ep/routing_layout.cuh"

namespace ferry::ep {

// Where this rank's rows go at each destination, from the counts every rank
// published (NOTE [EP direct rows]). Shared by the blocks of one launch.
struct DestinationRows {
  int32_t base[kMaxExperts];  // [W][Le]: first row of (destination, local expert) for this source
  int32_t total[kMaxExperts]; // [W][Le]: rows of (destination, local expert) from all sources
  int64_t needed[kMaxRanks]; // rows each destination needs (alignment padding included)
  // The destination's rows exceed its capacity: nothing is sent there.
  __device__ bool overflows(const Params& p, int r) const { return !p.low_latency && needed[r] > p.capacity_rows; }
};

// NOTE [EP own rows first]
// With EpConfig::own_rows_first (rank rows only), a destination r orders its
// sources r first, then the others by rank, both in its rows and in each
// expert's row list (which stays ascending); otherwise by rank. Its own rows are
// one per token of the call, all of them (the published token count to itself
// is num_tokens, publish_counts), so row t of rank r is r's token t: a place the
// host knows before any count, where the copy engine writes the token's data
// while the SMs move the peers' rows (EpBuffer::dispatch_send; the SMs still
// write the own rows' routing, and all of it when they quantize). The copy
// engine takes the first FERRY_EP_OWN_ROWS_COPY_PERCENT of the rows (p.own_rows_copied),
// the send kernel the rest, so the two can finish together. A token with
// no expert on r keeps its own row, with expert ids -1 and weights 0, and no
// row-list entry; combine skips it.
__device__ __forceinline__ bool source_before(int s, int source, int destination, bool own_first) {
  return own_first ? source != destination && (s == destination || s < source) : s < source;
}

// own_first: p.own_rows_first, or false where the layout has no such order (a
// constant there, so that kernel's code does not change).
__device__ inline void compute_destination_rows(const Params& p, const int32_t* counts, DestinationRows& rows,
                                                bool own_first) {
  const int W = p.world_size, Le = p.local_experts, E = p.num_experts;
  const int stride = E + W;
  for (int i = threadIdx.x; i < E; i += kThreads) {  // i = global expert id = destination * Le + local expert
    int before = 0, total = 0;
    const int destination = own_first ? i / Le : 0;
    for (int s = 0; s < W; ++s) {
      const int c = counts[s * stride + i];
      before += source_before(s, p.rank, destination, own_first) ? c : 0;
      total += c;
    }
    rows.base[i] = before;
    rows.total[i] = total;
  }
  __syncthreads();
  // Warp r: offsets of destination r's experts (a warp scan, not a serial loop:
  // one rank holds up to kMaxExperts experts).
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < W) {
    int32_t* base = rows.base + warp * Le;
    const int32_t* total = rows.total + warp * Le;
    const int64_t needed = warp_expert_offsets(
        p, Le, lane, [&](int le) { return int64_t(total[le]); },
        [&](int le, int64_t start) { base[le] += int32_t(start); });
    if (lane == 0) rows.needed[warp] = needed;
  }
  __syncthreads();
}

// NOTE [EP overflow is collective]
// Every rank computes every destination's rows from the all-gathered counts, so
// when one destination would overflow its output (max_recv_rows), every rank
// records it (naming that rank) and every rank's dispatch fails: no rank goes on
// to a combine that waits for partials the overflowed rank never produces.
// Nothing is sent to the overflowed rank; what the others received is discarded
// with the failed call. One thread of one block records the lowest such rank.
__device__ inline void record_overflow(const Params& p, const DestinationRows& rows) {
  for (int r = 0; r < p.world_size; ++r) {
    if (!rows.overflows(p, r)) continue;
    if (p.status->code == kEpOk) {
      p.status->value = rows.needed[r];
      p.status->rank = r;
      __threadfence_system();
      p.status->code = kEpTooManyRows;
    }
    return;
  }
}

// Block 0 of a dispatch send launch: the layout itself when it fuses it (NOTE
// [EP fused layout], in `smem`), then this rank's counts into every rank's
// counts region (epoch parity, NOTE [EP direct rows]) and the kCountsReady
// signal. A bad expert id publishes zeros: nothing is sent (EpBuffer reports it).
template <bool kOwnFirst>
__device__ __forceinline__ void publish_counts(const Params& p, uint8_t* smem, uint64_t epoch,
                                               size_t parity_offset) {
  const int W = p.world_size, E = p.num_experts;
  if (p.fuse_layout) {
    layout_block(p, reinterpret_cast<uint32_t*>(smem), 0, 1, fused_layout_block_tokens(p.num_tokens));
    __syncthreads();  // the layout's counts and error flag, for every thread
  }
  const bool bad = *p.layout_error != 0;
  for (int i = threadIdx.x; i < W * (E + W); i += kThreads) {
    const int r = i / (E + W), c = i % (E + W);
    // NOTE [EP own rows first]: every token is a row at its own rank.
    const int v = bad ? 0
                      : c < E ? p.send_expert_count[c]
                              : (kOwnFirst && c - E == p.rank ? p.num_tokens : p.send_token_count[c - E]);
    p.counts.at(r)[parity_offset + size_t(p.rank) * (E + W) + c] = v;
  }
  __syncthreads();
  p.flags.block_signal_row(kCountsReady, epoch, /*include_self=*/true);  // thread r < W: to rank r
}

}  // namespace ferry::ep
