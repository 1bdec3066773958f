// Layout: where each of this rank's tokens goes: the slot of every token at
// every destination rank and the index of every (token, k) among this rank's
// tokens of that expert, in token order, so every placement downstream is
// deterministic (rows of an expert ordered by source, then token).
//
// layout_block() is the algorithm for one block of kLayoutThreads tokens. The
// layout kernel (routing_layout.cu) runs it on one block per kLayoutThreads tokens; the
// dispatch send kernel runs it in its block 0 when the tokens fit one block
// (NOTE [EP fused layout] in dispatch.cu).
#pragma once

#include "ep/ep_device.cuh"

namespace ferry::ep {

constexpr int kLayoutWarps = kLayoutThreads / 32;

// A fused layout's block (NOTE [EP fused layout]) and its shared memory.
inline size_t fused_layout_smem_bytes(const Params& p) {
  return layout_smem_bytes(p.num_experts, fused_layout_block_tokens(p.num_tokens));
}

// Whether the fused layout takes one thread per (token, k) (NOTE [EP pair layout]).
inline bool takes_pair_layout(const Params& p) {
  return p.fuse_layout && p.pair_layout &&
         pair_layout_fits(p.num_tokens, p.topk, p.num_experts, kThreads, kFusedLayoutSmemBytes);
}

// The dynamic shared memory a send kernel's fused layout takes (none without one).
inline size_t fused_layout_send_smem_bytes(const Params& p) {
  return takes_pair_layout(p) ? layout_smem_bytes(p.num_experts, p.num_tokens * pair_layout_lanes(p.topk))
         : p.fuse_layout      ? fused_layout_smem_bytes(p)
                              : size_t(0);
}

// NOTE [EP layout scan]
// Block b takes tokens [b * kLayoutThreads, (b + 1) * kLayoutThreads), lane = token, warp =
// 32 consecutive tokens. Inside a warp everything is bit arithmetic: each lane
// ORs its bit into a per-warp shared mask per expert, so a token's index among
// the warp's tokens of expert e is popc(mask[e] below its lane) and the warp's
// count is popc(mask[e]); the slot at destination rank r comes from a ballot.
// An exclusive scan over the block's warps per expert and per rank gives
// offsets inside the block. One block is the whole layout. With several, the
// layout is two kernels (routing_layout.cu) and no block ever waits for another: the
// first writes each token's offsets inside its block and each block's totals
// (and its first bad entry), the second adds the totals of the lower blocks and
// block 0 writes the rank's totals. Nothing needs the blocks resident together,
// so the layout progresses on any number of free SMs (issue 15: a user's
// kernels may hold the rest). Token order is kept: rows of one expert from one
// source are ordered by token index. A repeated expert in one token's row is an
// error (it would need two rows of the same token for one expert).

// Block 0, thread 0: records the lowest bad entry (token * K + k) in the status.
__device__ inline void report_layout_error(const Params& p, int bad) {
  *p.layout_error = bad != INT32_MAX;
  if (bad != INT32_MAX && p.status->code == kEpOk) {
    const int bt = bad / p.topk, bk = bad % p.topk;
    const int e = load_expert(p, bt, bk);
    p.status->token = bt;
    p.status->k = bk;
    p.status->value = e;
    __threadfence_system();
    p.status->code = (e < -1 || e >= p.num_experts) ? kEpBadExpert : kEpRepeatedExpert;
  }
}

// `stamp(point)`: the EP trace's points inside the layout (NOTE [EP trace]; trace builds of the fused
// layout only, a no-op otherwise).
struct NoLayoutStamp {
  __device__ void operator()(int) const {}
};

// NOTE [EP layout code size]
// The per-token part of the layout is straight-line code (the ids stay in registers, so its loops over
// k are unrolled), and its length, not its loads, set the low-latency dispatch's first phase: on 2
// H100s a warm second pass of the fused layout over ONE token took 5.4 us, 3.0 of them from the ids'
// loads to the ballots (EP trace points 7-8, session 15), and the code there was ~25 KB of SASS:
// sixteen copies of the k step, each with the repeated-id compares against every earlier id and its
// own int32/int64 branch. So a repeated id is found by the value atomicOr returns (the lane's bit already
// set in the warp's mask of that expert: the same token picked it before), not by compares, and the index
// type is branched on once. The k steps stay unrolled up to kMaxTopk in ONE copy: a second copy unrolled
// to 8 for top-k <= 8 (picked at run time) made the send kernels larger than before (7560 SASS
// instructions against 6792 for the quantizing one) and the fp8 low-latency dispatch 2.4-2.8% slower at
// T >= 128, while one copy (6280) is no case slower (session 16, calls 1-3: bf16 T=1 0.974, T=128 0.971,
// fp8 0.957-0.983; docs/results/session16_2xH100/README.txt).
// e / experts_per_rank by a multiply (the division is ~25 instructions per k step): with m = ceil(2^32 / Le), floor(e * m / 2^32) = floor(e / Le) while e * Le < 2^32, which
// e < kMaxExperts and Le <= kMaxExperts keep.
struct ExpertRank {
  uint32_t magic;  // 0 for one expert per rank
  __device__ explicit ExpertRank(int experts_per_rank)
      : magic(experts_per_rank > 1 ? 0xFFFFFFFFu / uint32_t(experts_per_rank) + 1u : 0u) {}
  __device__ int rank(int e) const { return magic != 0 ? int(__umulhi(uint32_t(e), magic)) : e; }
};
static_assert(uint64_t(kMaxExperts) * kMaxExperts < (uint64_t(1) << 32), "ExpertRank's multiply is exact");

// The block's shared words beside `smem` (layout_block declares them). layout_block_k is layout_block's
// body taking them by reference, a split left from session 16's two instantiations of the k steps;
// folding it back (the three words as layout_block's own __shared__ arrays) changes the send kernels'
// SASS (dispatch +16, rank rows -48 instructions), so it waits for a GPU A/B.
struct LayoutShared {
  int32_t warp_rank[kWarps][kMaxRanks];
  int32_t rank_base[kMaxRanks];
  int32_t bad_entry;  // lowest token * K + k with a bad or repeated id
};

// Exclusive scans over a layout block's `warps` warps: each expert's per-warp mask becomes the count of that
// expert in the lower warps, each rank's per-warp count the same; the totals go to expert_total[E] and
// rank_total[W] (shared or global memory). Every thread of the block calls it, after a block barrier. The pair
// layout's; layout_block_k writes the same loops out (see there).
template <typename WarpRank, typename RankTotal>
__device__ __forceinline__ void scan_over_warps(uint32_t* warp_expert, WarpRank& warp_rank, int warps, int E, int W,
                                                int threads, int32_t* expert_total, RankTotal& rank_total) {
  for (int e = threadIdx.x; e < E; e += threads) {
    int run = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = __popc(warp_expert[w * E + e]);
      warp_expert[w * E + e] = run;
      run += c;
    }
    expert_total[e] = run;
  }
  if (threadIdx.x < W) {
    int run = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = warp_rank[w][threadIdx.x];
      warp_rank[w][threadIdx.x] = run;
      run += c;
    }
    rank_total[threadIdx.x] = run;
  }
}

template <typename Stamp>
__device__ inline void layout_block_k(const Params& p, uint32_t* smem, LayoutShared& shared, int block,
                                      int num_blocks, int block_tokens, Stamp stamp) {
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts;
  const int max_warps = block_tokens / 32;
  uint32_t* warp_expert = smem;                                                          // [max_warps][E]
  int32_t* expert_base = reinterpret_cast<int32_t*>(warp_expert + size_t(max_warps) * E);  // [E]
  auto& warp_rank = shared.warp_rank;
  auto& rank_base = shared.rank_base;
  int32_t& bad_entry = shared.bad_entry;

  const int threads = blockDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1;
  const int chunk = block * block_tokens;
  const int warps = max(0, min(max_warps, (p.num_tokens - chunk + 31) / 32));  // warps with tokens
  for (int i = threadIdx.x; i < warps * E; i += threads) warp_expert[i] = 0;
  if (threadIdx.x == 0) bad_entry = INT32_MAX;
  __syncthreads();
  stamp(7);

  const int t = chunk + warp * 32 + lane;
  const bool has_token = warp < warps && t < p.num_tokens;
  const int k_count = has_token ? K : 0;
  // The token's ids and positions stay in registers (loops unrolled over kMaxTopk, NOTE [EP layout code size]).
  int ids[kMaxTopk], pos[kMaxTopk], slot[kMaxRanks];
  unsigned dst_mask = 0;
  if (p.idx_int64) {
    const int64_t* row = static_cast<const int64_t*>(p.topk_idx) + size_t(t) * K;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) ids[k] = k < k_count ? static_cast<int>(row[k]) : -1;
  } else {
    const int32_t* row = static_cast<const int32_t*>(p.topk_idx) + size_t(t) * K;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) ids[k] = k < k_count ? row[k] : -1;
  }
  const unsigned lane_bit = 1u << lane;
  const ExpertRank rank_of(Le);
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) {
    if (k >= k_count) break;  // unrolled with an exit: ids stay in registers
    int e = ids[k];
    bool ok = e >= -1 && e < E;
    // A repeated id: this lane's bit is already in the expert's mask (set by an earlier k).
    if (ok && e >= 0) ok = (atomicOr(&warp_expert[warp * E + e], lane_bit) & lane_bit) == 0;
    if (!ok) {
      atomicMin(&bad_entry, t * K + k);
      e = -1;
    }
    ids[k] = e;
    p.token_expert[size_t(t) * K + k] = e;
    if (e >= 0) dst_mask |= 1u << rank_of.rank(e);
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) pos[k] = ids[k] >= 0 ? __popc(warp_expert[warp * E + ids[k]] & below) : -1;
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    slot[r] = -1;
    if (r >= W) continue;
    const unsigned sent = __ballot_sync(0xffffffffu, (dst_mask >> r) & 1u);
    slot[r] = (sent >> lane) & 1u ? __popc(sent & below) : -1;
    if (lane == 0 && warp < max_warps) warp_rank[warp][r] = __popc(sent);
  }
  stamp(8);
  __syncthreads();
  stamp(9);
  // Exclusive scans over the block's warps (per expert, per rank); block totals. scan_over_warps' loops, written
  // out: through that helper ptxas spilled 44 / 36 bytes in the bf16 send kernel (0 here; session 27).
  for (int e = threadIdx.x; e < E; e += threads) {
    int run = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = __popc(warp_expert[w * E + e]);
      warp_expert[w * E + e] = run;
      run += c;
    }
    expert_base[e] = run;
  }
  if (threadIdx.x < W) {
    int run = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = warp_rank[w][threadIdx.x];
      warp_rank[w][threadIdx.x] = run;
      run += c;
    }
    rank_base[threadIdx.x] = run;
  }
  __syncthreads();
  stamp(10);

  if (num_blocks == 1) {
    // The block's totals are the rank's; its offsets start at 0.
    for (int i = threadIdx.x; i < E + W; i += threads) {
      if (i < E) {
        p.send_expert_count[i] = expert_base[i];
        expert_base[i] = 0;
      } else {
        p.send_token_count[i - E] = rank_base[i - E];
        rank_base[i - E] = 0;
      }
    }
  } else {
    // First pass of several blocks: publish this block's totals and its first
    // bad entry; the offsets below stay inside the block (the second pass,
    // layout_add_lower_blocks, adds the lower blocks').
    int32_t* totals = p.layout_block_totals + size_t(block) * (E + W + 1);
    for (int i = threadIdx.x; i < E + W; i += threads) {
      if (i < E) {
        totals[i] = expert_base[i];
        expert_base[i] = 0;
      } else {
        totals[i] = rank_base[i - E];
        rank_base[i - E] = 0;
      }
    }
    if (threadIdx.x == 0) totals[E + W] = bad_entry;
  }
  __syncthreads();
  stamp(11);
  if (has_token) {
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k)
      if (k < K)
        p.pos_in_expert[size_t(t) * K + k] =
            ids[k] >= 0 ? pos[k] + int32_t(warp_expert[warp * E + ids[k]]) + expert_base[ids[k]] : -1;
#pragma unroll
    for (int r = 0; r < kMaxRanks; ++r)
      if (r < W) p.token_slot[size_t(t) * W + r] = slot[r] >= 0 ? slot[r] + warp_rank[warp][r] + rank_base[r] : -1;
  }
  if (num_blocks == 1 && threadIdx.x == 0) report_layout_error(p, bad_entry);
  stamp(12);
}

// NOTE [EP pair layout]
// layout_block_k gives one token's K steps to one thread, so a small call runs on few warps, each thread through
// a chain of K loads, atomics, stores and branches: at T=128 (low latency) 4 of the block's 32 warps work, and
// ids to ballots took 3.0 of the 5.4 us one fused layout pass took (session 15). Here a one-block layout whose
// block has a thread for every (token, k) takes one thread per pair, L = K rounded up to a power of two lanes per
// token, so a warp holds 32 / L whole tokens in token order. Each (token, expert) still owns one lane bit of the
// warp's mask of that expert (a repeated id's later lanes clear theirs), so a pair's place among the warp's tokens
// of its expert is popc(mask below its lane), as before; the token's ranks are an OR over its lanes (shuffles) and
// its slot at each rank a ballot of the tokens' first lanes. The outputs are layout_block_k's, bit for bit,
// including the lowest bad entry (an id out of range, or a repeat: the later k). The send kernel that runs it is
// its own instantiation (dispatch.cu), so the kernels of larger calls keep layout_block_k's code alone (NOTE [EP
// layout code size]). Measured (session 27, c1, 2xH100, low latency): dispatch bf16 T=1 0.894, fp8 T=1 / 128
// 0.948 / 0.957 of main's time, bf16 T=128 0.997.
template <typename Stamp>
__device__ inline void layout_block_pairs(const Params& p, uint32_t* smem, LayoutShared& shared, Stamp stamp) {
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts, T = p.num_tokens;
  const int lanes_per_token = pair_layout_lanes(K);
  const int warps = (T * lanes_per_token + 31) / 32;
  uint32_t* warp_expert = smem;  // [warps][E]
  auto& warp_rank = shared.warp_rank;
  int32_t& bad_entry = shared.bad_entry;
  const int threads = blockDim.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1, lane_bit = 1u << lane;
  for (int i = threadIdx.x; i < warps * E; i += threads) warp_expert[i] = 0;
  if (threadIdx.x == 0) bad_entry = INT32_MAX;
  __syncthreads();
  stamp(7);

  const int t = threadIdx.x / lanes_per_token, k = threadIdx.x % lanes_per_token;
  const bool has_pair = t < T && k < K, leader = t < T && k == 0;
  const unsigned token_lanes =
      (lanes_per_token == 32 ? 0xffffffffu : (1u << lanes_per_token) - 1u) << (lane & ~(lanes_per_token - 1));
  int e = -1;
  if (has_pair)
    e = p.idx_int64 ? static_cast<int>(static_cast<const int64_t*>(p.topk_idx)[size_t(t) * K + k])
                    : static_cast<const int32_t*>(p.topk_idx)[size_t(t) * K + k];
  bool ok = e >= -1 && e < E;
  if (has_pair && ok && e >= 0) atomicOr(&warp_expert[warp * E + e], lane_bit);
  __syncwarp();
  // A repeated id: an earlier lane of the same token holds the same expert's bit (the first one never clears).
  const bool repeated = has_pair && ok && e >= 0 && (warp_expert[warp * E + e] & token_lanes & below) != 0;
  __syncwarp();  // every lane's check, then the clears
  if (repeated) {
    atomicAnd(&warp_expert[warp * E + e], ~lane_bit);
    ok = false;
  }
  if (has_pair && !ok) {
    atomicMin(&bad_entry, t * K + k);
    e = -1;
  }
  if (has_pair) p.token_expert[size_t(t) * K + k] = e;
  __syncwarp();
  const int pos = e >= 0 ? __popc(warp_expert[warp * E + e] & below) : -1;
  const ExpertRank rank_of(Le);
  unsigned dst_mask = e >= 0 ? 1u << rank_of.rank(e) : 0u;
  for (int offset = lanes_per_token / 2; offset >= 1; offset >>= 1)
    dst_mask |= __shfl_xor_sync(0xffffffffu, dst_mask, offset);
  int slot[kMaxRanks];
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    slot[r] = -1;
    if (r >= W) continue;
    const unsigned sent = __ballot_sync(0xffffffffu, leader && ((dst_mask >> r) & 1u));
    slot[r] = (sent >> lane) & 1u ? __popc(sent & below) : -1;
    if (lane == 0 && warp < warps) warp_rank[warp][r] = __popc(sent);
  }
  stamp(8);
  __syncthreads();
  stamp(9);
  scan_over_warps(warp_expert, warp_rank, warps, E, W, threads, p.send_expert_count, p.send_token_count);
  __syncthreads();
  stamp(10);
  stamp(11);
  if (has_pair) p.pos_in_expert[size_t(t) * K + k] = e >= 0 ? pos + int32_t(warp_expert[warp * E + e]) : -1;
  if (leader) {
#pragma unroll
    for (int r = 0; r < kMaxRanks; ++r)
      if (r < W) p.token_slot[size_t(t) * W + r] = slot[r] >= 0 ? slot[r] + warp_rank[warp][r] : -1;
  }
  if (threadIdx.x == 0) report_layout_error(p, bad_entry);
  stamp(12);
}

// The layout of block `block` of `num_blocks` (num_blocks > 1: the blocks of
// one grid, blockIdx.x == block), each of `block_tokens` tokens (a multiple of
// 32, at most blockDim.x; smem: layout_smem_bytes(E, block_tokens)). Every
// thread of the block calls it; the first block_tokens take one token each, any
// others only help with the scans.
template <typename Stamp = NoLayoutStamp>
__device__ inline void layout_block(const Params& p, uint32_t* smem, int block, int num_blocks,
                                    int block_tokens = kLayoutThreads, Stamp stamp = {}) {
  __shared__ LayoutShared shared;
  layout_block_k(p, smem, shared, block, num_blocks, block_tokens, stamp);
}

// The whole call's layout in one block with one thread per (token, k) (NOTE [EP pair layout]; the caller checked
// pair_layout_fits for its block and shared memory).
template <typename Stamp = NoLayoutStamp>
__device__ inline void layout_block_of_pairs(const Params& p, uint32_t* smem, Stamp stamp = {}) {
  __shared__ LayoutShared shared;
  layout_block_pairs(p, smem, shared, stamp);
}

// NOTE [EP layout add loads]
// Every load of a thread's token (its K expert ids and positions, its W slots)
// is issued before any store and before the block totals' sums: the rows are
// read-modify-written through int32 pointers the compiler must assume alias,
// so a loop of load, add, store per k waited an L2 round trip for each load,
// 2K + W of them one after another (the second kernel's blocks took 2.6-4.3 us
// at T=4096, session 31's trace); batched, they are one round trip beside the
// totals' loads.
// The sum of column[b * stride] over b < blocks, 16 predicated loads in flight at a time (a remainder loop
// waited a round trip per load: NOTE [EP layout add loads]).
__device__ __forceinline__ int sum_block_totals(const int32_t* column, int stride, int blocks) {
  int sum = 0;
  for (int first = 0; first < blocks; first += 16) {
    int value[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) value[j] = column[size_t(min(first + j, blocks - 1)) * stride];  // in bounds
#pragma unroll
    for (int j = 0; j < 16; ++j) sum += first + j < blocks ? value[j] : 0;
  }
  return sum;
}

// Second pass of a layout of several blocks (num_blocks == gridDim.x of the
// first): block `block` adds the totals of the blocks below it to its tokens'
// offsets; block 0 also writes the rank's totals and reports a bad entry.
// `base` is shared memory for E + W ints.
__device__ inline void layout_add_lower_blocks(const Params& p, int32_t* base, int block, int num_blocks) {
  const int E = p.num_experts, K = p.topk, W = p.world_size, stride = E + W + 1;
  const int32_t* totals = p.layout_block_totals;
  const int t = block * kLayoutThreads + threadIdx.x;
  const bool has_token = threadIdx.x < kLayoutThreads && t < p.num_tokens;
  int expert[kMaxTopk], pos[kMaxTopk], slot[kMaxRanks];
  if (has_token) {
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) {
      if (k < K) {
        expert[k] = p.token_expert[size_t(t) * K + k];
        pos[k] = p.pos_in_expert[size_t(t) * K + k];
      }
    }
#pragma unroll
    for (int r = 0; r < kMaxRanks; ++r)
      if (r < W) slot[r] = p.token_slot[size_t(t) * W + r];
  }
  for (int i = threadIdx.x; i < E + W; i += blockDim.x) {
    base[i] = sum_block_totals(totals + i, stride, block);
    if (block == 0) {
      const int all_blocks = sum_block_totals(totals + i, stride, num_blocks);
      if (i < E)
        p.send_expert_count[i] = all_blocks;
      else
        p.send_token_count[i - E] = all_blocks;
    }
  }
  if (block == 0 && threadIdx.x == 0) {
    int bad = INT32_MAX;
    for (int b = 0; b < num_blocks; ++b) bad = min(bad, totals[size_t(b) * stride + E + W]);
    report_layout_error(p, bad);
  }
  __syncthreads();
  if (!has_token) return;
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k)
    if (k < K && expert[k] >= 0) p.pos_in_expert[size_t(t) * K + k] = pos[k] + base[expert[k]];
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r)
    if (r < W && slot[r] >= 0) p.token_slot[size_t(t) * W + r] = slot[r] + base[E + r];
}

}  // namespace ferry::ep
