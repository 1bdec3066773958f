// Where a source's rows go at each destination rank, from the counts every
// rank published before any data moves (NOTE [EP direct rows] in dispatch.cu):
// shared by the expanded dispatch (dispatch.cu) and the rank-rows one
// (rank_rows_dispatch.cu).
#pragma once

#include "ep/ep_device.cuh"
#include "ep/routing_layout.cuh"
#include "ferry/device/epoch_tag.hpp"

namespace ferry::ep {

// NOTE [EP tagged counts]
// Every source writes its counts (rows per expert, then tokens per rank) into
// every rank's counts region, at the call's epoch parity (NOTE [EP direct
// rows]). Each count travels as one 8-byte word: the call's epoch tag (NOTE
// [Epoch tags]) above the count (tagged_count), stored relaxed with no flag after it.
// A reader waits until every word of its region at that parity carries the
// call's tag (wait_counts: acquire loads, then a block barrier), then reads
// the counts with plain loads through CountsView. An aligned 8-byte store lands
// whole, so a tag seen is its own count's: the counts need one one-way trip
// over NVLink where a flag after them needed the writer's system-scope release
// (a round trip for the counts' stores) and then the flag's own trip. The word
// a tag replaces is the same parity's of two calls before, whose tag differs
// (NOTE [Epoch tags]). Seeing a source's words of call n
// still means it entered dispatch n, the reuse guard of NOTE [EP direct rows]:
// its earlier readers of this rank's outputs were complete before its send
// kernel began. The region is zeroed when the buffer is built, and a call's
// tag is never 0.
__device__ __forceinline__ uint64_t tagged_count(uint64_t epoch, int32_t count) {
  return (uint64_t(device::epoch_tag32(epoch)) << 32) | uint32_t(count);
}

// A rank's counts region at one parity, read as counts once wait_counts returned true.
struct CountsView {
  const uint64_t* words;
  __device__ __forceinline__ int32_t operator[](size_t i) const { return int32_t(uint32_t(words[i])); }
};

// Spins (the timeout primitive) until `word` carries `tag`; `source` and `phase` name the wait in a report.
// `count`, where given: the count the tagged word carries.
__device__ __forceinline__ bool wait_count_word(const uint64_t* word, uint32_t tag, const WaitContext& ctx, int source,
                                                int32_t phase, int32_t* count = nullptr) {
  uint64_t seen = 0;
  const bool ok = device::spin_wait(
      [&](uint64_t& observed) {
        seen = device::ld_acquire_sys(word);
        observed = seen >> 32;
        return uint32_t(observed) == tag;
      },
      ctx, source, phase, tag);
  if (count != nullptr) *count = int32_t(uint32_t(seen));
  return ok;
}

// The first stage of wait_counts and wait_counts_into_rows: thread s < W spins on source s's last count word alone
// (NOTE [EP tagged counts]); false for the whole block once a wait failed (`failed`: the caller's shared flag).
__device__ __forceinline__ bool wait_last_count_words(const Params& p, const uint64_t* region, uint32_t tag,
                                                      int32_t phase, int& failed) {
  const int W = p.world_size, stride = p.num_experts + W;
  const int s = static_cast<int>(threadIdx.x);
  if (s < W && !wait_count_word(region + s * stride + stride - 1, tag, p.wait, s, phase)) failed = 1;
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
}

// Block scope: this rank's counts of call `epoch` from every source are in (NOTE [EP tagged counts]); false for
// the whole block once a wait timed out or the communicator aborted (the host reports it). Thread s < W first
// spins on source s's last word alone, as the old flag wait did, so that the grid's blocks do not all poll every
// word while the counts are on their way; then every word is checked once (a source writes all of its words at
// once, so those loads find them) and spun on only where its tag is still missing.
__device__ __forceinline__ bool wait_counts(const Params& p, uint64_t epoch, int32_t phase) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int W = p.world_size, stride = p.num_experts + W, words = W * stride;
  const uint64_t* region = p.counts.at(p.rank) + size_t(epoch & 1) * words;
  const uint32_t tag = device::epoch_tag32(epoch);
  if (!wait_last_count_words(p, region, tag, phase, failed)) return false;
  for (int i = threadIdx.x; i < words; i += kThreads) {
    if (!wait_count_word(region + i, tag, p.wait, i / stride, phase)) {
      failed = 1;
      break;
    }
  }
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
}

// This rank's counts of call `epoch` into every rank's counts region (block scope, after the barrier that ends
// a fused layout; no barrier at the end): the layout's, zeros where the routing had a bad expert id (nothing is
// sent then). own_first: NOTE [EP own rows first]. With a fused layout the other blocks of this grid read the
// layout once they see this rank's words: each writing thread fences (GPU scope) after that barrier and before
// its stores, so a reader's acquire of its word also orders the whole block's layout stores before the reader's
// loads (fence-then-store release, cumulative through the barrier). A fence at GPU scope waits for local stores
// only: none of this block's stores to peers precede it.
__device__ __forceinline__ void write_counts(const Params& p, uint64_t epoch, bool own_first) {
  const int W = p.world_size, E = p.num_experts;
  const size_t at = size_t(epoch & 1) * W * (E + W) + size_t(p.rank) * (E + W);
  if (p.fuse_layout) __threadfence();
  const bool bad = *p.layout_error != 0;
  for (int i = threadIdx.x; i < W * (E + W); i += kThreads) {
    const int r = i / (E + W), c = i % (E + W);
    // NOTE [EP own rows first]: every token is a row at its own rank.
    const int v = bad ? 0
                      : c < E ? p.send_expert_count[c]
                              : (own_first && c - E == p.rank ? p.num_tokens : p.send_token_count[c - E]);
    device::st_relaxed_sys(p.counts.at(r) + at + c, tagged_count(epoch, v));
  }
}

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

// After rows.base (this source's rows before it) and rows.total per global expert: warp r turns destination r's
// into row offsets (a warp scan, not a serial loop: one rank holds up to kMaxExperts experts). Ends with a barrier.
__device__ inline void finish_destination_rows(const Params& p, DestinationRows& rows) {
  const int W = p.world_size, Le = p.local_experts;
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

// own_first: p.own_rows_first, or false where the layout has no such order (a
// constant there, so that kernel's code does not change).
__device__ inline void compute_destination_rows(const Params& p, CountsView counts, DestinationRows& rows,
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
  finish_destination_rows(p, rows);
}

// NOTE [EP counts into rows]
// wait_counts_into_rows is wait_counts for a send kernel that then computes its
// DestinationRows: the thread that acquires a count word adds the count into
// the block's per-expert sums in shared memory right away (rows.total, and
// rows.base where the source comes before this rank), so the block does not
// load every rank's counts again from global memory after the wait (an L2
// round trip on the path to the first row; session 30's trace put the
// destination rows at 1.5 us of a low-latency dispatch). finish_destination_rows
// is compute_destination_rows' second half (the per-destination scans).
__device__ __forceinline__ bool wait_counts_into_rows(const Params& p, uint64_t epoch, int32_t phase,
                                                      DestinationRows& rows) {
  __shared__ int failed;
  const int W = p.world_size, E = p.num_experts, stride = E + W, words = W * stride;
  if (threadIdx.x == 0) failed = 0;
  for (int i = threadIdx.x; i < E; i += kThreads) {
    rows.base[i] = 0;
    rows.total[i] = 0;
  }
  __syncthreads();
  const uint64_t* region = p.counts.at(p.rank) + size_t(epoch & 1) * words;
  const uint32_t tag = device::epoch_tag32(epoch);
  if (!wait_last_count_words(p, region, tag, phase, failed)) return false;
  for (int i = threadIdx.x; i < words; i += kThreads) {
    int32_t count = 0;
    const int source = i / stride, c = i % stride;
    if (!wait_count_word(region + i, tag, p.wait, source, phase, &count)) {
      failed = 1;
      break;
    }
    if (c < E) {
      atomicAdd(&rows.total[c], count);
      if (source < p.rank) atomicAdd(&rows.base[c], count);
    }
  }
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
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
// counts region (NOTE [EP tagged counts]). A bad expert id publishes zeros:
// nothing is sent (EpBuffer reports it).
template <bool kOwnFirst>
__device__ __forceinline__ void publish_counts(const Params& p, uint8_t* smem, uint64_t epoch) {
  if (p.fuse_layout) {
    layout_block(p, reinterpret_cast<uint32_t*>(smem), 0, 1, fused_layout_block_tokens(p.num_tokens));
    __syncthreads();  // the layout's counts and error flag, for every thread
  }
  write_counts(p, epoch, kOwnFirst);
}

}  // namespace ferry::ep
