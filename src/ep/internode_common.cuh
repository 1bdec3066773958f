// The cross-node EP path: what its dispatch (internode_dispatch.cu) and combine
// (internode_combine.cu) kernels share: the protocol, the window's box offsets, the
// waits and the last-block election.
// EP dispatch and combine across nodes (an EpBuffer whose ranks span nodes):
// the "direct" path, every rank writing straight to every destination rank,
// through the device API (include/ferry/device/channel.cuh) on one
// ferry::Window. Same results as the intranode kernels (dispatch.cu,
// combine.cu): rows of one expert contiguous, ordered by source rank then
// source token; combine sums the partials of the token's ranks in rank order.
//
// NOTE [EP across nodes]
// Window (internode_params.hpp, NetLayout): dispatch inbox/outbox and combine
// inbox/outbox, each [2 parity][W peer] slots; call n of a kind uses parity n & 1.
//  - dispatch send (pack): the layout kernel (routing_layout.cu) gives each token its
//    slot at every destination rank. Warps write, per (token, chunk of columns)
//    and destination, the token's record at its slot: the routing record (the
//    token index at the source, per k the local expert at the destination or
//    -1, its index among the source's tokens of that expert, the weight), then
//    the row in the dispatch type (rows.cuh: bf16, bf16 quantized to fp8 with
//    its scales, or fp8 input with its scales). Records for a destination of
//    this node (NVLink, or this rank itself) go straight into its inbox through
//    node_ptr (channel.cuh); those for another node into this rank's outbox.
//    Block 0 first writes each destination's header (its token count, then
//    this rank's rows for every one of the E experts) and sends it (put or
//    signal, word kSigDispatchData); the records follow in ranges, each sent
//    when its last item is written (NOTE [EP across nodes: pipelined ranges]).
//    Every destination gets its header and every range signal, also with no
//    tokens (and with a bad expert id in this rank's routing: nothing sent).
//  - dispatch receive: waits for kSigDispatchData >= n from every source (the
//    headers; the records of a range once its signal is seen), reads the headers (recv_ptr: the device window, or the pinned
//    landing buffer for a source of another node), computes the experts'
//    offsets (alignment padding, low-latency slabs) and each source's first row
//    per expert, then scatters the records (rows, scales, weights) it owns, and
//    remembers per (source, slot) the output row of each k and the source token
//    (for combine). From the headers every rank also knows every rank's rows,
//    so a high-throughput overflow (max_recv_rows) is seen by every rank, which
//    records it naming the lowest such rank (NOTE [EP overflow is collective]);
//    the overflowed rank writes nothing.
//  - combine send: per received (source, slot, chunk), the weighted sum of the
//    token's expert outputs at this rank (fp32, bf16 on the wire) at the slot's
//    row of the home's combine inbox (NVLink: directly; else this rank's
//    outbox); each range of rows goes when complete (NOTE [EP across nodes:
//    pipelined ranges]).
//  - combine receive: once the ranges holding a token's slots have landed,
//    out[t] = sum over the ranks the token went to, in rank order
//    (fp32), of the partial at that rank's slot for t; zeros for a token with no
//    expert. With ranges, the last block signals kSigCombineConsumed to every
//    expert rank (NOTE [EP across nodes: reuse]).
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
//     call n (stores or a put); d reads it in its receive n. The slot of the
//     same parity was last read in d's receive n - 2, and s knows that one is
//     over without a signal of its own, by the call order (NOTE [EpBuffer call
//     order]: each half on the device after the one before it): s's receive
//     n - 1, which runs before s's send n, waited for d's kSigDispatchData of
//     n - 1 (every source signals every destination each call, also with no
//     tokens), which d's send n - 1 gives, which starts only after d's receive
//     n - 2 has ended. So no kSigDispatchConsumed on this path, and no wait at
//     the start of a send (a poll of host memory and a relay: ~4 us of a
//     low-latency call over shared memory, 2 H100s, session 20's trace).
//     Parities: call n - 1 writes the other one while d may still be in
//     receive n - 2.
//  2. Dispatch outbox of (s, d, parity): the proxy copies a put's source
//     asynchronously (staging, or the NIC reading GPU memory), so the outbox
//     is busy until d has the data. d saw the data signal of n - 2, which the
//     proxy issues after the data (NOTE [Network signals]), in its receive
//     n - 2, so the chain of (1) frees the outbox of parity n & 1 too.
//  3. Combine inbox/outbox of (home h, expert rank d, parity m & 1), m the
//     combine count (several combines per dispatch). One box per home (low
//     latency): the chain of (1) with kSigCombineData, since d's combine
//     receive m - 1 waits for every expert rank's box, h's included. With
//     ranges (high throughput) a combine receive waits only for the ranges
//     holding its own tokens, so h may have sent d nothing d waited for: there
//     h's combine receive signals kSigCombineConsumed (its m-th) and d's combine
//     send m waits for >= m - 2 from every h.
//  4. The local arrays (layout, slot rows, output) follow the stream order and
//     the call-order rules of the API, as inside a node.
// Every rank makes the same calls in the same order, so the n of a kind agrees
// everywhere.
#pragma once

#include "ep/ep_device.cuh"
#include "ep/internode_params.hpp"
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
// (a peer of this node, this rank, or a peer whose landing buffer is mapped
// here: dev::direct_ptr, NOTE [Mapped peers]), else this rank's outbox for it,
// in the window's send view (dev::send_view: the puts take SourceIn::kSendView).
__device__ __forceinline__ uint8_t* dispatch_target(const NetParams& np, int peer, int parity) {
  const int W = np.p.world_size;
  if (char* direct = dev::direct_ptr(np.w, peer))
    return reinterpret_cast<uint8_t*>(direct) + dispatch_in(np.lay, W, parity, np.p.rank);
  return reinterpret_cast<uint8_t*>(dev::send_view(np.w)) + dispatch_out(np.lay, W, parity, peer);
}
__device__ __forceinline__ uint8_t* combine_target(const NetParams& np, int home, int parity) {
  const int W = np.p.world_size;
  if (char* direct = dev::direct_ptr(np.w, home))
    return reinterpret_cast<uint8_t*>(direct) + combine_in(np.lay, W, parity, np.p.rank);
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


// NOTE [EP across nodes: one waiter per grid]
// Signals from ranks of other nodes land in mapped host memory, and a staged
// window's data too (NOTE [Window data]). Every block polling them, or reading a
// source's header word by word, is a storm of small uncached PCIe reads that
// queue behind the grid's own writes to host memory: on 2 H200s as 2 virtual
// nodes over shared memory, a low-latency receive half whose data had long
// landed took 690 us, and send blocks saw a signal set calls ago up to 140 us
// late (NOTE [EP trace]). So block 0 alone waits (wait_all_ranks) and then
// stores the target into a relay word in device memory (release, after the
// block barrier that follows its acquires); the other blocks wait for that word
// (acquire), so the chain block 0's acquire -> its release -> their acquire
// orders everything the signal guards before their reads. A failed wait in
// block 0 records the timeout or sees the abort, which ends the others' waits
// too (they poll the abort flag). Relay words hold targets, which only grow per
// word, so they are never reset; target 0 waits for nothing.
__device__ bool wait_all_ranks_relayed(const NetParams& np, uint32_t index, uint64_t target, int32_t phase,
                                       NetRelay relay) {
  if (target == 0) {
    // Still a block barrier, as wait_all_ranks is: callers publish shared memory
    // before the wait (net_combine_send_kernel's load_recv_counts). Returning
    // without it was the bug of the first GPU run (docs/results/session10_2xH200/
    // net_relay_first_run/): combine partials of the first two calls went
    // unwritten where threads read the counts too early.
    __syncthreads();
    return true;
  }
  uint64_t* word = np.relay.flags + relay;
  if (blockIdx.x == 0) {
    const bool ok = wait_all_ranks(np, index, target, phase);
    if (ok && threadIdx.x == 0) device::st_release_sys(word, target);
    return ok;
  }
  __shared__ int relayed;
  if (threadIdx.x == 0) relayed = device::wait_flag_geq(word, target, np.p.wait, np.p.rank, phase);
  __syncthreads();
  return *static_cast<volatile int*>(&relayed) != 0;
}

// NOTE [EP across nodes: pipelined ranges]
// In high throughput (lay.pipelined; low latency sends one box per destination
// from the last block, halves one after the other: NOTE [EP across nodes: range
// size] in ep_buffer.cpp) the direct path's dispatch does not store and forward
// whole boxes (docs/internode.md, Part 6):
//  - send: block 0 first writes every destination's header (its counts are
//    known from the layout) and sends it with kSigDispatchData. A destination's
//    records form ranges of lay.range_records slots (at least kMinRangeBytes,
//    at most kMaxNetRanges ranges). Each (token, chunk) item, after its warp's
//    stores (__syncwarp), adds 1 to relay.range_written[destination][range]
//    after a system fence; the add that completes a range (records x chunks)
//    fences again and sends the range: a put of its records with
//    kSigDispatchRange + k for a peer reached through the proxy, only the
//    signal for a peer stored in place (NVLink, mapped landing). The last
//    block signals every range word the call did not use and zeroes the
//    counters, so after a rank's n-th dispatch every range word holds n at
//    every peer.
//  - receive (launched while the send grid runs, path overlaps): after the
//    headers, warp kWarps - 1 of block 0 waits for each source's ranges in
//    order and publishes relay_word(epoch, ranges landed) in relay word
//    kRelayRanges + source (NOTE [EP across nodes: one waiter per grid]); the
//    other warps place (source, slot) items once their range is published.
//  - combine, the same way: an expert rank's partial rows for a home form
//    ranges of lay.combine_range_rows slots (kSigCombineRange + k, counters
//    relay.combine_range_written, NetTarget in internode_combine.cu); the home's
//    receive half (beside its send half) relays each rank's ranges in
//    kRelayCombineRanges + rank, and a warp sums token t's chunk once the ranges
//    holding t's slot at every rank it went to are published. kSigCombineData
//    is no longer sent on this path.
//    Reuse is unchanged (NOTE [EP across nodes: reuse]).
// One thread, after its warp's stores (__syncwarp): counts one item into a
// range; true for the count that completes it (`expected` items), after which
// every counted item's stores are ordered before what the caller sends.
__device__ inline bool count_range_item(uint32_t* counter, unsigned expected) {
  __threadfence_system();  // the warp's stores (ordered by its __syncwarp) before the count
  if (atomicAdd(counter, 1u) + 1u != expected) return false;
  __threadfence_system();  // every counted item's stores (each fenced before its add) before the range goes
  return true;
}

// NOTE [EP across nodes: signals stored by the GPU]
// Every signal word of the direct path gets exactly one signal per call, of 1:
// kSigDispatchData / kSigCombineData per destination (one thread of one block),
// each range word (the warp that completes the range, else the last block for
// a range the call did not use), the consumed words (the receive half's last
// block). So after call e a word reads e, the epoch of the half that signals it,
// and where the peer's signal words are mapped here (NOTE [Mapped signals]: UCX
// shared memory) the signalling thread stores e itself, after its data, with no
// proxy hop; elsewhere it signals 1 as before. Successive calls' stores to one
// word come in order: a send kernel is launched after the previous call's
// receive grid, which waited for its own send grid to end, and a receive grid
// starts after its call's send kernel started (halves on one stream, in order).
__device__ inline void signal_call(const DeviceWindow& w, int peer, uint32_t index, uint64_t epoch) {
  if (dev::mapped_signals(w, peer) != nullptr)
    dev::store_signal_total(w, peer, index, epoch);
  else
    dev::signal(w, peer, index, 1);
}

// A complete range of a box for `peer`: only the signal where it was stored in
// place (NVLink, a mapped landing buffer), else a put of its bytes from the
// outbox (send view) with the signal. One thread; `epoch`: the call's.
__device__ inline void send_range(const NetParams& np, int peer, uint32_t signal, size_t in_offset,
                                  size_t out_offset, size_t bytes, uint64_t epoch) {
  if (dev::direct_ptr(np.w, peer) != nullptr) {
    signal_call(np.w, peer, signal, epoch);
    return;
  }
  dev::put_group(np.w, peer, in_offset, out_offset, bytes, true, signal, 1, 0u, 1u, [] {}, dev::SourceIn::kSendView);
}

// A relay word's value: the call's epoch above the ranges landed, so it only grows from call to call and within
// one. kRelayRangeBits low bits hold the ranges (at most kMaxNetRanges); the epoch keeps 64 - kRelayRangeBits bits,
// 2^56 calls before it wraps (with 32 it wrapped after 2^32 calls, and a wait then passed on the last call's word).
constexpr int kRelayRangeBits = 8;
static_assert(kMaxNetRanges < (1 << kRelayRangeBits), "a relay word's ranges fit its low bits");
__device__ __forceinline__ uint64_t relay_word(uint64_t epoch, int ranges) {
  return (epoch << kRelayRangeBits) | uint64_t(ranges);
}
// The ranges a relay word holds (its epoch's part stripped).
__device__ __forceinline__ int relay_word_ranges(uint64_t word) {
  return int(word & ((uint64_t(1) << kRelayRangeBits) - 1));
}

// Relay warp of a receive half (NOTE [EP across nodes: one waiter per grid]): lane r < W publishes peer r's
// ranges as they land: counts[r] items (records or partial rows) in ranges of per_range, range k signalled
// in word signal_base + k, published as relay_word(epoch, ranges landed) in relay word relay_base + r.
// Dispatch: relay_ranges(np, token_count, lay.range_records, kSigDispatchRange, kRelayRanges, ...);
// combine: relay_ranges(np, p.send_token_count, lay.combine_range_rows, kSigCombineRange, kRelayCombineRanges, ...).
__device__ inline void relay_ranges(const NetParams& np, const int32_t* counts, int per_range, uint32_t signal_base,
                                    int relay_base, uint64_t epoch, int32_t phase) {
  const int lane = threadIdx.x & 31;
  if (lane >= np.p.world_size) return;
  const int ranges = (counts[lane] + per_range - 1) / per_range;
  uint64_t* word = np.relay.flags + relay_base + lane;
  for (int k = 0; k < ranges; ++k) {
    if (!dev::wait_signal(np.w, lane, signal_base + k, epoch, phase)) return;
    device::st_release_sys(word, relay_word(epoch, k + 1));
  }
}

// The item loop of a receive half with ranges: warp kWarps - 1 of block 0 relays (true for it: it runs
// relay_ranges and takes no items); the other warps renumber `first` and `stride` around it.
__device__ inline bool take_relay_warp(const Params& p, int& first, int& stride) {
  const int relay = p.spread_items ? (kWarps - 1) * int(gridDim.x) : kWarps - 1;
  const bool relays = first == relay;
  if (first > relay) --first;
  --stride;
  return relays;
}

// One thread's wait until relay word `word` has published range k of this epoch (NOTE [EP across nodes:
// pipelined ranges]); `landed` (per warp and peer, in shared memory) keeps the ranges last seen there, so
// most items wait for nothing. False: the wait timed out or was aborted (the host reports it).
__device__ inline bool wait_range_landed(const uint64_t* word, uint64_t epoch, int k, int& landed,
                                         const WaitContext& wait, int peer, int32_t phase) {
  if (landed > k) return true;
  if (!device::wait_flag_geq(word, relay_word(epoch, k + 1), wait, peer, phase)) return false;
  landed = relay_word_ranges(device::ld_acquire_sys(word));
  return true;
}

}  // namespace
}  // namespace ferry::ep
