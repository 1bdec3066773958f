// Rank-rows dispatch (EpLayout::kRankRows): the send half writes each token once
// into every destination rank it picked, straight into its final row there,
// with the row's routing and its entries in the destination's per-expert row
// lists; the receive half only waits until every source is done and writes the
// offsets. Protocol: NOTE [EP rank rows] here, NOTE [EP direct rows] in dispatch.cu.
#include <algorithm>

#include "ep/destination_rows.cuh"
#include "ep/ep_device.cuh"
#include "ep/routing_layout.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP rank rows]
// Rows of a destination are grouped by source rank, in each source's token
// order: the row of token t from source s at destination r is
// (rows of sources below s at r) + token_slot[t][r]. Its entries in r's
// per-expert row lists sit where the expanded layout would put the token's
// expert rows (DestinationRows::base + pos_in_expert: ordered by source, then
// token). Both need every source's counts before data moves, so the counts
// exchange of NOTE [EP direct rows] comes first and guards reuse the same way.
// Every position is computed by the sender, so a destination has nothing to do
// per row: the sender's last block (NOTE [EP last block]: it has acquired every
// block's stores, and its release covers them) stores the epoch into
// kRowsWritten + sender at every destination, itself included, and a
// destination's receive half waits for that word from every source. The offsets
// and the -1 padding of the row lists need only the counts, so the receive half
// writes them once every rank's counts are in (wait_counts), while the rows
// move, and after the last row only returns: the padding lies past each
// expert's entries, where no sender writes, and the caller reads none of it
// before the call ends. A call whose layout was bad sends nothing but still
// signals. EpConfig::own_rows_first orders the sources differently and makes
// every token an own row: NOTE [EP own rows first] (destination_rows.cuh).
// dispatch() on more than 8 SMs (and the halves apart) runs the one receive
// block as a grid of its own, started by programmatic dependent launch while the
// send grid runs; on fewer, the send grid does it (NOTE [EP rank rows one grid]).
// Measured on 2 H100s (T=4096, H=7168, top-8): the send's time is not monotonic
// in SMs (bf16: 16 SMs 218-221 us, 24 SMs 251-255, 32 SMs 231-234), and giving a
// few warps of each block only the own rank's rows (the rest only NVLink) was no
// faster at any split (docs/results/ep_2xH100.txt); splitting whole blocks by
// role is (NOTE [EP rank rows by role]).
// NOTE [EP rank rows one grid]
// dispatch() of a call on few SMs (at most 8, ep_overlap.cpp: where one more
// send block pays; with more it lost) that does not quantize launches no
// receive grid: the send grid gets every SM (one more send block than beside a
// receive block), and its last block, after telling every destination it is
// done, writes the receive half's offsets (write_recv_offsets) and waits for
// every source's rows-written word, then advances the receive half's epoch.
// Both epochs move once per dispatch, so the send epoch stands for the receive
// one. The last
// block waits only for other ranks' send grids, never for a block of its own
// grid, so the grid progresses on any number of free SMs. The offsets come at
// the tail here (the receive grid wrote them while rows moved): in block 0
// before its items they made ptxas spill in the items' loop, as did the
// quantizing kernel with them at the tail, so quantizing calls and the halves
// (dispatch_send, dispatch_recv) keep the one-block receive grid.
// NOTE [EP rank rows by role]
// With p.rank_rows_local_blocks = n > 0, the last n send blocks write only this
// rank's own rows (local HBM) and the others only the peers' rows (NVLink), each
// group walking every token. Local copies in the same SM as NVLink stores slow
// the NVLink stores down: on 2 H200s, 24 SMs of 16-byte stores move about 325
// GB/s to the peer, but 271 GB/s when each item also goes to a local row
// (`ferry-bench nvlink`, store vs store_local; 322 GB/s with 2/3 of the SMs
// storing to the peer and 1/3 copying locally, store_split). The token is read
// twice (once per group), a small price next to the writes. How many own-row
// blocks, and from how many SMs: rank_rows_local_blocks (ep_buffer.cpp).
struct RankRowsTargets {
  DestinationRows rows;       // index-list positions (expanded-layout rows), per destination
  int32_t row_base[kMaxRanks];      // first rank row of this source at each destination
  int64_t rows_needed[kMaxRanks];   // rank rows each destination receives from all sources
  __device__ bool overflows(const Params& p, int r) const { return rows_needed[r] > p.capacity_rows; }
};

template <bool kOwnFirst>
__device__ void compute_rank_rows(const Params& p, CountsView counts, RankRowsTargets& t) {
  compute_destination_rows(p, counts, t.rows, kOwnFirst);  // ends with a barrier
  const int W = p.world_size, E = p.num_experts;
  if (threadIdx.x < W) {
    const int r = threadIdx.x;
    int before = 0;
    int64_t total = 0;
    for (int s = 0; s < W; ++s) {
      const int c = counts[s * (E + W) + E + r];
      before += source_before(s, p.rank, r, kOwnFirst) ? c : 0;  // NOTE [EP own rows first]
      total += c;
    }
    t.row_base[r] = before;
    t.rows_needed[r] = total;
  }
  __syncthreads();
}

// NOTE [EP overflow is collective] (dispatch.cu), for rank rows.
__device__ void record_rank_rows_overflow(const Params& p, const RankRowsTargets& t) {
  for (int r = 0; r < p.world_size; ++r) {
    if (!t.overflows(p, r)) continue;
    if (p.status->code == kEpOk) {
      p.status->value = t.rows_needed[r];
      p.status->rank = r;
      __threadfence_system();
      p.status->code = kEpTooManyRows;
    }
    return;
  }
}

// One chunk of token t into its row at every destination it picked among
// `destinations` (a rank mask); with the first chunk, the row's routing and its
// row-list entries there.
template <bool kQuantize, bool kOwnFirst>
__device__ void send_rank_row_chunk(const Params& p, const RankRowsTargets& targets, int t, int c, int lane,
                                    unsigned destinations, uint8_t** dst, float** dst_scales) {
  const int W = p.world_size, K = p.topk, Le = p.local_experts;
  const TokenRouting routing = load_token_routing(p, t, lane);
  const int slot = routing.slot, e = routing.expert, pos = routing.pos;
  const float w = routing.weight;
  // NOTE [EP own rows first]: then every token has a row here, at row t.
  const bool own_row = kOwnFirst && lane == p.rank;
  const unsigned dst_mask = __ballot_sync(
      0xffffffffu,
      (slot >= 0 || own_row) && ((destinations >> lane) & 1u) && !targets.overflows(p, lane < W ? lane : 0));
  if (dst_mask == 0) return;
  const int groups = p.hidden / kScaleBlock;
  const size_t row_bytes = size_t(p.hidden) * (p.fp8_out ? 1 : 2);
  int num_dst = 0;
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    const int slot_there = __shfl_sync(0xffffffffu, slot, r);
    const bool own_first_row = kOwnFirst && r == p.rank;
    const int64_t row = targets.row_base[r] + (own_first_row ? t : slot_there);
    if (c == 0 && lane < K) {
      const bool here = e >= 0 && e / Le == r;
      p.peer_row_experts.at(r)[row * K + lane] = here ? e % Le : -1;
      if (p.with_weights) p.peer_row_weights.at(r)[row * K + lane] = here ? w : 0.f;
      if (here) p.peer_expert_rows.at(r)[targets.rows.base[r * Le + e % Le] + pos] = int32_t(row);
    }
    if (own_first_row && t < p.own_rows_copied) continue;  // its data: the copy engine's
    if (lane == 0) {
      dst[num_dst] = p.peer_out_tokens.at(r) + row * row_bytes;
      if (p.fp8_out) dst_scales[num_dst] = p.peer_out_scales.at(r) + row * groups;
    }
    ++num_dst;
  }
  __syncwarp();
  if (num_dst == 0) return;  // only the own row's routing (warp-uniform)
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();  // dst is rewritten by the warp's next item
}

// The receive half's work, once every rank's counts are in (wait_counts): the
// per-expert counts and offsets, the source offsets and the row lists' -1
// padding (NOTE [EP rank rows]). One block; offsets: [Le + 1] of shared memory.
__device__ void write_recv_offsets(const Params& p, uint64_t epoch, int64_t* offsets) {
  const int W = p.world_size, Le = p.local_experts, E = p.num_experts;
  const int stride = E + W;
  __shared__ bool overflow;
  const CountsView counts{p.counts.at(p.rank) + size_t(epoch & 1) * W * stride};
  const int mine = p.rank * Le;
  for (int le = threadIdx.x; le < Le; le += kThreads) {
    int rows = 0;
    for (int s = 0; s < W; ++s) rows += counts[s * stride + mine + le];
    offsets[le + 1] = rows;  // this expert's entries, for now
    p.expert_counts[le] = rows;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp == 0) {
    const int64_t end = warp_expert_offsets(
        p, Le, lane, [&](int le) { return offsets[le + 1]; }, [&](int le, int64_t start) { offsets[le] = start; });
    __syncwarp();
    if (lane == 0) offsets[Le] = end;
    const int count = lane < W ? counts[lane * stride + E + p.rank] : 0;
    // NOTE [EP own rows first]: this rank's rows, then the others' in rank order.
    const int own_count = p.own_rows_first ? __shfl_sync(0xffffffffu, count, p.rank) : 0;
    const int ordered = p.own_rows_first && lane == p.rank ? 0 : count;
    const int inclusive = warp_inclusive_sum(ordered, lane);
    const int before = p.own_rows_first && lane == p.rank ? 0 : inclusive - ordered + own_count;
    if (lane < W) {
      p.recv_token_count[lane] = count;
      p.source_offsets[lane] = before;
    }
    const int total = __shfl_sync(0xffffffffu, inclusive, W - 1) + own_count;
    if (lane == 0) {
      p.source_offsets[W] = total;
      overflow = total > p.capacity_rows;  // reported by the send half
    }
  }
  __syncthreads();
  for (int le = threadIdx.x; le <= Le; le += kThreads) p.expert_offsets[le] = offsets[le];
  if (!overflow && p.expert_alignment > 1) {
    // The -1 padding after each expert's entries, one warp per expert.
    for (int le = warp; le < Le; le += kWarps) {
      const int64_t first = offsets[le] + p.expert_counts[le];
      for (int64_t i = first + lane; i < offsets[le + 1]; i += 32) p.out_expert_rows[i] = -1;
    }
  }
}

// kOwnFirst: p.own_rows_first (NOTE [EP own rows first]), a template argument so
// that the rank-order kernels compile as they did before it.
template <bool kQuantize, bool kOneGrid, bool kOwnFirst>
__global__ void __launch_bounds__(kThreads, 1) rank_rows_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  const int W = p.world_size, E = p.num_experts;
  extern __shared__ __align__(16) uint8_t send_smem[];
  RankRowsTargets& targets = *reinterpret_cast<RankRowsTargets*>(send_smem);
  const size_t parity_offset = size_t(epoch & 1) * W * (E + W);
  allow_receive_grid();  // the one receive block may start spinning (NOTE [Overlapped halves and free SMs])
  if (blockIdx.x == 0) publish_counts<kOwnFirst>(p, send_smem, epoch);
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  if (wait_counts(p, epoch, kPhaseEpDispatch)) {
    const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
    compute_rank_rows<kOwnFirst>(p, CountsView{p.counts.at(p.rank) + parity_offset}, targets);
    if (blockIdx.x == 0 && threadIdx.x == 0) record_rank_rows_overflow(p, targets);
    if (!bad) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      const int items = p.num_tokens * p.num_chunks;
      // NOTE [EP rank rows by role]
      const int local_blocks = p.rank_rows_local_blocks;
      const int peer_blocks = int(gridDim.x) - local_blocks;
      const bool local_role = int(blockIdx.x) >= peer_blocks;
      const unsigned own = 1u << p.rank;
      const unsigned destinations = local_blocks == 0 ? ~0u : (local_role ? own : ~own);
      const ItemLoop loop = local_blocks == 0 ? ItemLoop(p)
                                              : (local_role ? ItemLoop(p, int(blockIdx.x) - peer_blocks, local_blocks)
                                                            : ItemLoop(p, int(blockIdx.x), peer_blocks));
      for (int item = loop.first; item < items; item += loop.stride)
        send_rank_row_chunk<kQuantize, kOwnFirst>(p, targets, item / p.num_chunks, item % p.num_chunks, lane,
                                                  destinations, warp_dst[warp], warp_scales[warp]);
    }
  }
  // NOTE [EP rank rows]: the last block tells every destination this source is done.
  if (!arrive_last<false>(p, kDispatchSend)) return;
  p.flags.block_signal_row(kRowsWritten, epoch, /*include_self=*/true);
  advance_epoch(p, kDispatchSend, epoch);
  // NOTE [EP rank rows one grid]: then it ends the receive half, once every source's rows are here.
  if constexpr (kOneGrid) {
    write_recv_offsets(p, epoch, reinterpret_cast<int64_t*>(send_smem));
    if (wait_all_peers(p, kRowsWritten, epoch, kPhaseEpDispatch)) publish_epoch(p, kDispatchRecv, epoch);
  }
}

static_assert(sizeof(RankRowsTargets) >= sizeof(int64_t) * (kMaxExperts + 1), "write_recv_offsets fits");
size_t rank_rows_send_smem_bytes(const Params& p) {
  return std::max(sizeof(RankRowsTargets), p.fuse_layout ? fused_layout_smem_bytes(p) : size_t(0));
}
static_assert(std::max(sizeof(RankRowsTargets), kFusedLayoutSmemBytes) + 2 * sizeof(void*) * kWarps * kMaxRanks +
                      sizeof(int32_t) * kWarps * kMaxRanks + 256 <=
                  kDefaultSmemBytes,
              "no shared-memory opt-in needed");

// One block: the offsets once every rank's counts are in, then waits for every
// source's rows (NOTE [EP rank rows]).
__global__ void __launch_bounds__(kThreads, 1) rank_rows_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  extern __shared__ int64_t offsets[];  // [Le + 1]
  if (!wait_counts(p, epoch, kPhaseEpDispatch)) return;  // aborted: the host throws
  write_recv_offsets(p, epoch, offsets);
  if (!wait_all_peers(p, kRowsWritten, epoch, kPhaseEpDispatch)) return;
  finish_launch(p, kDispatchRecv, epoch, -1);
}

// The send kernel's instances by [own rows first][quantize, one grid, neither] (NOTE [EP rank rows one grid]: not
// with quantizing, that kernel then spills, ptxas): what the launch picks from and the load walks.
using SendKernel = void (*)(Params);
constexpr SendKernel kSendKernels[2][3] = {
    {rank_rows_send_kernel<true, false, false>, rank_rows_send_kernel<false, true, false>,
     rank_rows_send_kernel<false, false, false>},
    {rank_rows_send_kernel<true, false, true>, rank_rows_send_kernel<false, true, true>,
     rank_rows_send_kernel<false, false, true>},
};

}  // namespace

void load_rank_rows_dispatch_kernels() {
  for (const auto& instances : kSendKernels)
    for (SendKernel kernel : instances) load_kernels(kernel);
  load_kernels(rank_rows_recv_kernel);
}

void launch_rank_rows_dispatch_send(const Params& p, cudaStream_t stream) {
  const bool quantize = quantizes(p);
  FERRY_CHECK(!p.recv_in_send_grid || !quantize, Error, "one-grid rank rows do not quantize");
  const SendKernel kernel = kSendKernels[p.own_rows_first ? 1 : 0][quantize ? 0 : p.recv_in_send_grid ? 1 : 2];
  kernel<<<p.num_blocks, kThreads, rank_rows_send_smem_bytes(p), stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_rank_rows_dispatch_recv(const Params& p, cudaStream_t stream) {
  Params one = p;
  one.num_blocks = 1;
  launch_receive_grid(rank_rows_recv_kernel, one, sizeof(int64_t) * (p.local_experts + 1), stream);
}

}  // namespace ferry::ep
