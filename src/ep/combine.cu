// Combine: the send half reduces, for every token this rank received, the
// weighted outputs of its local experts (fp32) and writes the bf16 partial sum
// once into the token's home rank; the receive half sums each token's partials
// as soon as they are ready, in rank order (fp32), into out[t]. Protocol:
// NOTE [EP epochs].
#include "ep/combine_order.hpp"
#include "ep/ep_device.cuh"
#include "ep/ep_trace.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

constexpr int kUnroll = kCombineUnroll;

// NOTE [EP trace] points. Send: 0 start, 1 homes' consumed words seen, 2 items done.
// Receive: 0 start, 1 items done, 2 (trace builds) the send grid complete.
FERRY_EP_TRACE_DEFINE(g_trace_combine_send)
FERRY_EP_TRACE_DEFINE(g_trace_combine_recv)

// The partial of each received token goes to its home rank's stage, at the
// token's index there; each chunk's ready word is released after it.
// NOTE [EP combine own release]
// A partial for this rank's own token lands in this rank's stage and is read only by this GPU's home sum (the
// receive grid, or the one-role own item), whose acquire is at system scope: a GPU-scope release pairs with it
// (both scopes hold both threads), and it waits only for this GPU's stores, where a system-scope one (MEMBAR.SYS)
// waits for every outstanding store of the warp toward the system. A peer's partial keeps the system scope.
struct IntranodeTarget {
  const Params& p;
  uint64_t epoch;
  size_t home_index = 0;
  __device__ uint8_t* row(int s, int, size_t index) {
    home_index = size_t(p.rank) * p.max_tokens + p.slot_src_token[index];
    return p.combine_stage.at(s) + home_index * (size_t(p.hidden) * 2);
  }
  __device__ void written(int s, int c, int lane) {
    if (lane != 0) return;
    uint64_t* ready = p.combine_ready.at(s) + home_index * p.num_chunks + c;
    if (s == p.rank)  // NOTE [EP combine own release]
      device::st_release_gpu(ready, epoch);
    else
      device::st_release_sys(ready, epoch);
  }
};

// NOTE [EP combine one role]
// Two roles split the SMs: on 2 ranks, 18 of 24 reduce every received token's expert rows into a bf16 partial
// for its home, its own home's included, and 6 sum each home token's partials into `out`. The reducing side
// reads every expanded row (471 MB at T=4096, top-8 of 256), so its SMs set the time (ep-notes, session 23:
// ~1.10 TB/s on 18 SMs against ~1.5 on 24 in ferry-bench nvlink's register-load probe). combine() in high
// throughput inside a node instead gives every SM but one the reduction (combine_send_kernel<true>):
//  - Items are claimed one per warp from a ticket (Epochs::combine_ticket) in one order: the tokens of the
//    peers first, peer by peer from rank + 1 on, then this rank's own. A warp claims an own item only when
//    every item owed to a peer has been claimed by a running warp, and those wait for nothing, so the waits
//    below end whatever number of each rank's blocks is resident, one or more (static striding could leave two
//    partly resident grids waiting on each other; ranks sharing a GPU split its SMs, NOTE [SM budget]).
//  - An own item's warp sums the token chunk into `out`: its own partial first where that keeps the order's
//    roundings (NOTE [EP combine one role: own partial first]: every token on 2 ranks), else its partial goes to
//    this rank's stage as before (its ready word too), then the warp waits for the other ranks' partials of
//    that token chunk and sums them all in rank order: the roundings and the order of the receive half, so
//    `out` is bitwise the two-role result.
//  - After the own items, one ticket per (token, chunk) of this rank: the tokens with no row here (no own item)
//    are summed there, the others skipped. They too wait only for partials the peers produce first. (At top-8
//    of 256, uniform, 0.35% of the tokens have no row here on 2 ranks, 34% on 8: one receive block could not
//    keep up.)
//  - The receive grid (one block) sums nothing; its finish still releases kCombineConsumed after the send grid
//    is complete (finish_launch), so peers overwrite the stage only after both grids read it.
//  - The send grid's last block resets the ticket (arrive_last: every warp claimed its last item before it).
// The halves API (combine_send, combine_recv) and the cross-node paths keep two roles.
static_assert(kMaxOrderRanks == kMaxRanks, "OneRoleOrder covers every rank");

// OneRoleOrder::build by thread 0, for the whole block.
__device__ void one_role_order(const Params& p, const int32_t* token_count, OneRoleOrder& order) {
  if (threadIdx.x == 0) order.build(p.rank, p.world_size, token_count, p.num_chunks, p.num_tokens);
  __syncthreads();
}

// NOTE [EP trace] phase sums of the one-role loop: 0 the ticket, 1 a peer item's partial (or a staged own one),
// 2 the home sum's token and ranks, 3 the wait for the peers' partials, 4 the sum into out (own partial first:
// its reduction too).
FERRY_EP_PHASE_DEFINE(g_phases_one_role)

// NOTE [EP combine one role: own partial first]
// The home sum adds the partials in rank order onto 0: ((0 + p_a) + p_b) + p_c ... in fp32, with p_a, p_b, ...
// the bf16 partials of the ranks that hold rows of the token. fp32 addition is commutative (a + b and b + a
// round alike), so (0 + p_a) + p_b = (0 + p_b) + p_a bitwise (0 + x also turns -0 into +0 on either side): the
// first two partials may come in either order, the rest may not. So where this rank is the first or second of
// a token's ranks (every token on 2 ranks), its own item's warp starts the sum with its own partial: reduced
// from the expert rows into the sum's registers, rounded to bf16 as the stage would hold it, added onto 0; then
// it adds the other ranks' partials in rank order. `out` is the same bits as the two-role result, and the own
// partial never goes through the stage: no write and read back (59 MB each at T=4096 on 2 ranks), no ready
// word and its system-scope release per own item. Where this rank comes third or later (3+ ranks), the kernel
// for 3+ ranks (kAnyPlace) keeps the rounded partial in the warp's slice of shared memory (one step of units, 2 KB
// a warp; in registers beside the sum's it spilled, session 24) and adds it in its place in the rank order, after
// the lower ranks' partials: the same bits again, and no own partial goes through the stage. The 2-rank kernel
// never needs that and keeps its code (ptxas spilled differently with the slice's code in it, and at 2 ranks the
// combine read 1.043 of main's time, session 26 c4). Measured (session 27, c5, 4xH100, T=4096, 4 rounds): 4
// ranks 0.962-0.965 of the staged own partial's time at 24 SMs, 0.965-0.968 at 48, 0.992-1.018 at 8; 2 ranks 0.999.
__device__ __forceinline__ int own_position(const Params& p, unsigned ranks) {
  return __popc(ranks & ((1u << p.rank) - 1u));
}

// Bytes of the one-role send grid's dynamic shared memory at 3+ ranks (kAnyPlace): each warp's slice.
constexpr size_t kOneRoleScratchBytes = size_t(kWarps) * kCombineUnroll * 32 * sizeof(uint4);

// The warp's lanes whose ranks staged a partial of (t, c) (`waits`) wait for its ready word at once; false when a
// wait failed.
__device__ __forceinline__ bool wait_home_partials(const Params& p, int t, int c, uint64_t epoch, int lane,
                                                   bool waits) {
  int ok = 1;
  if (waits)
    ok = device::wait_flag_geq(p.combine_ready.at(p.rank) + (size_t(lane) * p.max_tokens + t) * p.num_chunks + c,
                               epoch, p.wait, lane, kPhaseEpCombine);
  if (!__all_sync(0xffffffffu, ok)) return false;
  __syncwarp();  // the waiting lanes' acquires, then every lane's loads (a vote orders no memory)
  return true;
}

// The home's sum of its token t's chunk c into out[t]: the staged partials of the ranks in `ranks`, in rank
// order (identical rounding everywhere). Lanes with has_partial (this lane's rank is in `ranks`) wait for their
// rank's partial first (all at once). num_own_rows > 0 (the one-role combine's own item, NOTE [EP combine one
// role: own partial first]): the sum starts with this rank's partial, reduced from own_rows / own_weights, and
// `ranks` holds the others; with own_scratch (this warp's slice, kAnyPlace only) the own partial joins after the
// ranks below this one instead. False when a wait failed. phase_clock (trace builds, the one-role loop): marks the
// end of the wait (NOTE [EP trace] phase sums). kPrefetchSteps: NOTE [EP combine L2 prefetch] (rows.cuh).
template <int kPrefetchSteps = 0, bool kAnyPlace = false>
__device__ __forceinline__ bool sum_home_chunk(const Params& p, int t, int c, uint64_t epoch, int lane,
                                               bool has_partial, unsigned ranks, int num_own_rows = 0,
                                               const uint8_t* const* own_rows = nullptr,
                                               const float* own_weights = nullptr,
                                               unsigned long long* phase_clock = nullptr,
                                               uint4* own_scratch = nullptr) {
  const size_t row_bytes = size_t(p.hidden) * 2;
  if (!wait_home_partials(p, t, c, epoch, lane, has_partial)) return false;
  if (phase_clock != nullptr) FERRY_EP_PHASE_MARK(g_phases_one_role, 3, *phase_clock);
  const size_t offset = size_t(chunk_begin(p, c)) * 2;
  const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
  uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
  for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
    float acc[kUnroll][8] = {};
    if (num_own_rows > 0) {
      // The own partial, as combine_send_item sums it.
      accumulate_item_rows<kPrefetchSteps>(acc, own_rows, own_weights, num_own_rows, offset, base, chunk_units,
                                           lane);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {  // rounded as the stage holds it, then the sum's first step: 0 + it
        if constexpr (kAnyPlace) {
          if (own_scratch != nullptr) {  // or kept to join after the lower ranks' partials
            own_scratch[u * 32 + lane] = pack_bf16x8(acc[u]);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[u][e] = 0.f;
            continue;
          }
        }
        const uint4 partial = pack_bf16x8(acc[u]);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[u][e] = 0.f;
        fma_bf16x8(acc[u], 1.f, partial);
      }
    }
    // Rank order (identical rounding everywhere); with own_scratch: the ranks below this one, the own partial,
    // the ranks above.
    auto add_staged = [&](unsigned staged_ranks) {
      for (unsigned m = staged_ranks; m != 0; m &= m - 1) {
        const int r = __ffs(m) - 1;
        const uint8_t* partial = p.combine_stage.at(p.rank) + (size_t(r) * p.max_tokens + t) * row_bytes + offset;
        prefetch_row_steps_ahead<kPrefetchSteps>(partial, base, chunk_units, lane);
        accumulate_units(acc, partial, 1.f, base, chunk_units, lane);
      }
    };
    unsigned below = ranks;
    if constexpr (kAnyPlace)
      if (own_scratch != nullptr) below &= (1u << p.rank) - 1u;
    add_staged(below);
    if (kAnyPlace && own_scratch != nullptr) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fma_bf16x8(acc[u], 1.f, own_scratch[u * 32 + lane]);
      add_staged(ranks & ~below);
    }
    store_units(out, acc, base, chunk_units, lane);
  }
  return true;
}

// NOTE [EP combine one role]: this warp's items by ticket; own items end with the token chunk's sum. Every row
// and partial it reads is asked of the L2 kPrefetchSteps ahead (NOTE [EP combine L2 prefetch], rows.cuh).
// kAnyPlace (3+ ranks): scratch is the block's dynamic shared memory, kOneRoleScratchBytes, a slice per warp.
template <int kPrefetchSteps, bool kAnyPlace>
__device__ void combine_one_role_items(const Params& p, const OneRoleOrder& order, IntranodeTarget& target,
                                       uint64_t epoch, uint4* scratch) {
  __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
  __shared__ float warp_weights[kWarps][kMaxTopk];
  const int W = p.world_size, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int total = order.total();
  const bool layout_ok = *p.layout_error == 0;  // else nothing was sent and `out` is not written (as two roles)
  FERRY_EP_PHASE_CLOCK(phase_clock);
  for (;;) {
    int ticket = 0;
    if (lane == 0) ticket = int(atomicAdd(&p.epochs->combine_ticket, 1u));
    ticket = __shfl_sync(0xffffffffu, ticket, 0);
    if (ticket >= total) break;
    int s, slot, c;
    order.decode(ticket, W, p.num_chunks, s, slot, c);
    FERRY_EP_PHASE_MARK(g_phases_one_role, 0, phase_clock);
    if (s != p.rank && s != kHomeSweep) {  // a peer's token: its partial into the peer's stage
      combine_send_item<IntranodeTarget, false, kPrefetchSteps>(p, s, slot, c, target, warp_rows[warp],
                                                                warp_weights[warp]);  // one row at a time
      FERRY_EP_PHASE_MARK(g_phases_one_role, 1, phase_clock);
      continue;
    }
    // An own item's token, or the sweep's: its sum, if this item is the one that does it.
    const int t = s == kHomeSweep ? slot : p.slot_src_token[size_t(s) * p.max_tokens + slot];
    const int token_slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
    const unsigned ranks = __ballot_sync(0xffffffffu, token_slot >= 0);
    FERRY_EP_PHASE_MARK(g_phases_one_role, 2, phase_clock);
    if (s == kHomeSweep && (!layout_ok || ((ranks >> p.rank) & 1u))) continue;  // summed by its own item
    int num_own_rows = 0;  // > 0: the own partial first (NOTE [EP combine one role: own partial first])
    unsigned staged = ranks;
    uint4* own_scratch = nullptr;
    if (s == p.rank) {
      if (kAnyPlace || own_position(p, ranks) <= 1) {  // kAnyPlace: every own partial in the sum, at its place
        num_own_rows = gather_item_rows(p, size_t(s) * p.max_tokens + slot, warp_rows[warp], warp_weights[warp]);
        staged &= ~(1u << p.rank);
        if (kAnyPlace && own_position(p, ranks) > 1) own_scratch = scratch + warp * (kUnroll * 32);
      } else {  // this rank third or later: its partial through the stage (no prefetch: with it ptxas spills
                // 56/176 bytes against 48/152, and this path was not measured)
        combine_send_item(p, s, slot, c, target, warp_rows[warp], warp_weights[warp]);
        FERRY_EP_PHASE_MARK(g_phases_one_role, 1, phase_clock);
      }
    }
    const bool ok = sum_home_chunk<kPrefetchSteps, kAnyPlace>(p, t, c, epoch, lane, (staged >> lane) & 1u, staged,
                                                              num_own_rows, warp_rows[warp], warp_weights[warp],
                                                              &phase_clock, own_scratch);
    __syncwarp();  // warp_rows is rewritten by the next item
    if (!ok) break;
    FERRY_EP_PHASE_MARK(g_phases_one_role, 4, phase_clock);
  }
}

// NOTE [EP combine own partial at home]
// In low latency the two-role combine leaves a rank's own tokens to its receive grid: the send grid sends only the
// partials its peers' tokens need, and each receive item (token t, chunk c) reduces this rank's own expert rows of t
// itself before it waits for the peers' partials, holds that partial rounded to bf16 as the stage would (in the
// warp's 2 KB slice of the block's dynamic shared memory, kOwnScratchBytes), and starts the sum with it (NOTE [EP
// combine one role: own partial first]: the same bits, where this rank is the first or second of t's ranks, every
// token on 2 ranks). So an own partial is no longer written to the stage, released and read back, and the receive
// item's chain no longer waits for another warp's own item. The receive grid waits only for the peers' send grids,
// which wait for nothing: no new wait. Both halves choose by the same Params (own_partial_at_home_path, in
// launch_combine_send and launch_combine_recv), so the halves API stays consistent.
// Only on 2 ranks (1 too): at 3+ ranks each home waits on several peers, and reducing its own rows in the receive
// item put that work on the path the send grid ran beside. Session 41 c3, 4 ranks on 4xH200, 3 rounds, main (own at
// home wherever this rank was first or second of a token's ranks) against this rule (the send grid stages every
// own partial there, as before session 37): combine 0.811 / 0.864 / 0.925 / 0.944 at T=1 / 128 / 256 / 512
// (T=128: 38.8 -> 33.5 us, NCCL 36.3), the dispatch after it 0.86-1.00; the same as the commit before the change.
__device__ __forceinline__ bool own_partial_at_home(const Params& p, unsigned ranks) {
  return ((ranks >> p.rank) & 1u) != 0 && own_position(p, ranks) <= 1;
}

// The send grid's items with the own partial at home: (source, slot, chunk) over the peers only, rank + 1 on, so no
// warp walks skipped items (a cursor over every rank that skips this one left the blocks of one parity idle,
// rank_rows_combine.cu).
__device__ void combine_peer_items(const Params& p, const int32_t* token_count, int max_token_count,
                                   IntranodeTarget& target) {
  __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
  __shared__ float warp_weights[kWarps][kMaxTopk];
  const int W = p.world_size, warp = threadIdx.x >> 5;
  const int sources = W - 1;
  const int total = sources * max_token_count * p.num_chunks;
  const ItemLoop loop(p);
  for (int item = loop.first; item < total; item += loop.stride) {
    const int c = item % p.num_chunks, pair = item / p.num_chunks;
    const int s = (p.rank + 1 + pair % sources) % W, slot = pair / sources;
    if (slot >= token_count[s]) continue;
    combine_send_item<IntranodeTarget, true>(p, s, slot, c, target, warp_rows[warp], warp_weights[warp]);
  }
}

// The receive item's sum with the own partial at home: sum_home_chunk's order and roundings. The chunk goes in
// pieces of kOwnPieceUnits units (4 a lane). A piece's own partial is reduced before the wait for the peers'
// partials (the own rows kOwnRowsAtOnce at a time, one unit a lane: NOTE [EP combine rows in flight]) and held
// rounded to bf16 in the warp's slice of shared memory (`own_slice`, kOwnPieceUnits units; in registers it spilled
// 112 bytes), so only the peers' partials' loads and the stores follow the wait.
constexpr int kOwnUnits = 4, kOwnRowsAtOnce = 4, kOwnPieceUnits = 32 * kOwnUnits;
constexpr size_t kOwnScratchBytes = size_t(kWarps) * kOwnPieceUnits * sizeof(uint4);
__device__ __forceinline__ bool sum_home_chunk_own_first(const Params& p, int t, int c, uint64_t epoch, int lane,
                                                         unsigned staged, bool own_first, int num_own_rows,
                                                         const uint8_t* const* own_rows, const float* own_weights,
                                                         uint4* own_slice) {
  const size_t row_bytes = size_t(p.hidden) * 2;
  const size_t offset = size_t(chunk_begin(p, c)) * 2;
  const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
  const uint8_t* stage = p.combine_stage.at(p.rank) + size_t(t) * row_bytes + offset;  // + rank r's part below
  const size_t stage_rank_bytes = size_t(p.max_tokens) * row_bytes;
  uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
  for (int piece = 0; piece < chunk_units; piece += kOwnPieceUnits) {
    if (own_first) {
#pragma unroll 1
      for (int u = 0; u < kOwnUnits; ++u) {
        float acc[1][8] = {};
        accumulate_rows<1, kOwnRowsAtOnce>(acc, own_rows, own_weights, num_own_rows, offset, piece + u * 32,
                                           chunk_units, lane);
        own_slice[u * 32 + lane] = pack_bf16x8(acc[0]);  // as the stage would hold it
      }
    }
    // The peers' partials of this chunk, once.
    if (piece == 0 && !wait_home_partials(p, t, c, epoch, lane, (staged >> lane) & 1u)) return false;
    // The first staged rank's units all at once, any others' one at a time (none while own_partial_at_home_path
    // keeps this kernel to 2 ranks).
    const int first = staged != 0 ? __ffs(staged) - 1 : 0;
    uint4 v[kOwnUnits];
#pragma unroll
    for (int u = 0; u < kOwnUnits; ++u) {
      const int i = piece + u * 32 + lane;
      if (staged != 0 && i < chunk_units) v[u] = device::load16(stage + first * stage_rank_bytes + size_t(i) * 16);
    }
#pragma unroll
    for (int u = 0; u < kOwnUnits; ++u) {
      const int i = piece + u * 32 + lane;
      if (i >= chunk_units) continue;
      float acc[8] = {};
      // 0 + the own partial (this lane's own store in the slice: no barrier needed), then the others in rank order.
      if (own_first) fma_bf16x8(acc, 1.f, own_slice[u * 32 + lane]);
      for (unsigned m = staged; m != 0; m &= m - 1) {
        const int r = __ffs(m) - 1;
        fma_bf16x8(acc, 1.f, r == first ? v[u] : device::load16(stage + r * stage_rank_bytes + size_t(i) * 16));
      }
      device::store16(out + size_t(i) * 16, pack_bf16x8(acc));
    }
  }
  return true;
}

// kOneRole: NOTE [EP combine one role].
// kPrefetchSteps (one role): NOTE [EP combine L2 prefetch]. kAnyPlace (one role, 3+ ranks): NOTE [EP combine one
// role: own partial first].
// kOwnAtHome (two roles, low latency): NOTE [EP combine own partial at home].
template <bool kOneRole, int kPrefetchSteps = 0, bool kAnyPlace = false, bool kOwnAtHome = false>
__global__ void __launch_bounds__(kThreads, 1) combine_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineSend);
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  FERRY_EP_TRACE_POINT(g_trace_combine_send, 0);
  load_recv_counts(p, token_count, max_token_count);
  // Homes must be done reading the partials this rank sent them last time.
  if (wait_all_peers(p, kCombineConsumed, epoch - 1, kPhaseEpCombine)) {
    FERRY_EP_TRACE_POINT(g_trace_combine_send, 1);
    IntranodeTarget target{p, epoch};
    if constexpr (kOneRole) {
      __shared__ OneRoleOrder order;
      one_role_order(p, token_count, order);
      if constexpr (kAnyPlace) {
        extern __shared__ uint4 one_role_scratch[];
        combine_one_role_items<kPrefetchSteps, true>(p, order, target, epoch, one_role_scratch);
      } else {
        combine_one_role_items<kPrefetchSteps, false>(p, order, target, epoch, nullptr);
      }
    } else if constexpr (kOwnAtHome) {
      combine_peer_items(p, token_count, max_token_count, target);
    } else {
      combine_send_items<IntranodeTarget, true>(p, token_count, max_token_count, target);  // rows in flight
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_combine_send, 2);
  FERRY_EP_TRACE_REPORT(g_trace_combine_send, "combine_send", p, epoch, 3);
  if constexpr (kOneRole) {
    // finish_launch's steps, with the ticket reset by the last block (the NOTE); this grid is launched without
    // the programmatic attribute, so finish_launch's wait for a send grid has nothing to wait for here.
    if (!arrive_last<false>(p, kCombineSend)) return;
    FERRY_EP_PHASE_REPORT(g_phases_one_role, "combine_one_role", p, epoch, 5);
    if (threadIdx.x == 0) p.epochs->combine_ticket = 0;
    publish_epoch(p, kCombineSend, epoch);
  } else {
    finish_launch(p, kCombineSend, epoch, -1);
  }
}

// kOneRole: nothing to sum (the send grid sums every token: NOTE [EP combine one role]); the grid only releases
// kCombineConsumed once the send grid is complete (finish_launch).
// kOwnAtHome (two roles, low latency): NOTE [EP combine own partial at home].
template <bool kOneRole, bool kOwnAtHome = false>
__global__ void __launch_bounds__(kThreads, 1) combine_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int W = p.world_size;
  const int lane = threadIdx.x & 31;
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 0);
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (!kOneRole && *p.layout_error == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      if constexpr (kOwnAtHome) {
        extern __shared__ uint4 own_scratch[];  // kOwnScratchBytes
        __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
        __shared__ float warp_weights[kWarps][kMaxTopk];
        const int warp = threadIdx.x >> 5;
        const bool own_first = own_partial_at_home(p, ranks);
        int num_own_rows = 0;
        if (own_first) {
          const int own_slot = __shfl_sync(0xffffffffu, slot, p.rank);
          num_own_rows = gather_item_rows(p, size_t(p.rank) * p.max_tokens + own_slot, warp_rows[warp],
                                          warp_weights[warp]);
        }
        const bool ok = sum_home_chunk_own_first(p, t, c, epoch, lane, own_first ? ranks & ~(1u << p.rank) : ranks,
                                                 own_first, num_own_rows, warp_rows[warp], warp_weights[warp],
                                                 own_scratch + warp * kOwnPieceUnits);
        __syncwarp();  // warp_rows is rewritten by the next item
        if (!ok) break;
      } else if (!sum_home_chunk(p, t, c, epoch, lane, slot >= 0, ranks)) {
        break;
      }
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 1);
#ifdef FERRY_EP_TRACE
  wait_for_send_grid();  // trace builds: point 2 = the send grid complete (finish_launch waits again, at once)
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 2);
#endif
  FERRY_EP_TRACE_REPORT(g_trace_combine_recv, "combine_recv", p, epoch, 3);
  finish_launch(p, kCombineRecv, epoch, kCombineConsumed);
}

}  // namespace

// The one-role send kernels by [prefetch][3+ ranks] (NOTE [EP combine L2 prefetch], NOTE [EP combine one role:
// own partial first]).
using SendKernel = void (*)(Params);
constexpr SendKernel kOneRoleKernels[2][2] = {
    {combine_send_kernel<true, 0, false>, combine_send_kernel<true, 0, true>},
    {combine_send_kernel<true, 1, false>, combine_send_kernel<true, 1, true>}};

void load_combine_kernels() {
  for (const auto& by_place : kOneRoleKernels) load_kernels(by_place[0], by_place[1]);
  load_kernels(combine_send_kernel<false>, combine_recv_kernel<true>, combine_recv_kernel<false>);
  load_kernels(combine_send_kernel<false, 0, false, true>, combine_recv_kernel<false, true>);
  FERRY_CUDA_CHECK(cudaFuncSetAttribute(combine_recv_kernel<false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(kOwnScratchBytes)));
  // Above the 48 KB a kernel may take without asking.
  for (const auto& by_place : kOneRoleKernels)
    FERRY_CUDA_CHECK(cudaFuncSetAttribute(by_place[1], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kOneRoleScratchBytes)));
}

// NOTE [EP combine own partial at home]: low latency on at most 2 ranks.
static bool own_partial_at_home_path(const Params& p) { return p.low_latency && p.world_size <= 2; }

void launch_combine_send(const Params& p, cudaStream_t stream, bool one_role, int prefetch_max_blocks) {
  if (one_role) {
    // A rank with no tokens may pass no `out` (ep_args.cpp): it sums nothing.
    FERRY_CHECK(p.combine_out != nullptr || p.num_tokens == 0, Error, "the one-role combine's send grid needs out");
    // NOTE [EP combine L2 prefetch]: only on few SMs.
    const bool any_place = p.world_size > 2;
    const SendKernel kernel = kOneRoleKernels[p.num_blocks <= prefetch_max_blocks][any_place];
    kernel<<<p.num_blocks, kThreads, any_place ? kOneRoleScratchBytes : 0, stream>>>(p);
  } else if (own_partial_at_home_path(p)) {
    combine_send_kernel<false, 0, false, true><<<p.num_blocks, kThreads, 0, stream>>>(p);
  } else {
    combine_send_kernel<false><<<p.num_blocks, kThreads, 0, stream>>>(p);
  }
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_combine_recv(const Params& p, cudaStream_t stream, bool one_role) {
  if (one_role)
    launch_receive_grid(combine_recv_kernel<true>, p, 0, stream);
  else if (own_partial_at_home_path(p))
    launch_receive_grid(combine_recv_kernel<false, true>, p, kOwnScratchBytes, stream);
  else
    launch_receive_grid(combine_recv_kernel<false>, p, 0, stream);
}

}  // namespace ferry::ep
