// Layout: where each of this rank's tokens goes: the slot of every token at
// every destination rank and the index of every (token, k) among this rank's
// tokens of that expert, in token order, so every placement downstream is
// deterministic (rows of an expert ordered by source, then token).
//
// layout_block() is the algorithm for one block of kLayoutThreads tokens. The
// layout kernel (layout.cu) runs it on one block per kLayoutThreads tokens; the
// dispatch send kernel runs it in its block 0 when the tokens fit one block
// (NOTE [EP fused layout] in dispatch.cu).
#pragma once

#include "ep/kernel_common.cuh"

namespace ferry::ep {

constexpr int kLayoutWarps = kLayoutThreads / 32;

// Dynamic shared memory of layout_block: per-warp expert masks, then expert bases.
constexpr size_t layout_smem_bytes(int num_experts) {
  return sizeof(int32_t) * size_t(kLayoutWarps + 1) * num_experts;
}
static_assert(layout_smem_bytes(kMaxExperts) <= 40 * 1024, "the fused layout leaves room in 48 KB");

// NOTE [EP layout scan]
// Block b takes tokens [b * kLayoutThreads, (b + 1) * kLayoutThreads), lane = token, warp =
// 32 consecutive tokens. Inside a warp everything is bit arithmetic: each lane
// ORs its bit into a per-warp shared mask per expert, so a token's index among
// the warp's tokens of expert e is popc(mask[e] below its lane) and the warp's
// count is popc(mask[e]); the slot at destination rank r comes from a ballot.
// An exclusive scan over the block's warps per expert and per rank gives
// offsets inside the block. With several blocks, they then publish their
// totals, meet at a grid barrier (all blocks are resident: at most
// kMaxLayoutBlocks) and add the totals of lower blocks; one block needs none of
// that. Token order is kept: rows of one expert from one source are ordered by
// token index. A repeated expert in one token's row is an error (it would need
// two rows of the same token for one expert).
__device__ inline bool layout_grid_barrier(const Params& p) {
  __syncthreads();
  __shared__ int ok;
  if (threadIdx.x == 0) {
    ok = 1;
    if (gridDim.x > 1) {
      volatile unsigned* generation = &p.layout_barrier[1];
      const unsigned gen = *generation;
      __threadfence();  // this block's totals before its arrival
      if (atomicAdd(&p.layout_barrier[0], 1u) == gridDim.x - 1) {
        p.layout_barrier[0] = 0;  // the last one resets, then releases the others
        __threadfence();
        atomicAdd(&p.layout_barrier[1], 1u);
      } else {
        ok = device::spin_wait(
            [&](uint64_t& seen) {
              seen = *generation;
              return seen != gen;
            },
            p.wait, -1, kPhaseEpDispatch, gen + 1);
      }
      __threadfence();  // the other blocks' totals after the barrier
    }
  }
  __syncthreads();
  return ok != 0;
}

// The layout of block `block` of `num_blocks` (num_blocks > 1: the blocks of
// one grid, blockIdx.x == block). Every thread of the block calls it; the first
// kLayoutThreads take one token each, any others only help with the scans.
// Returns false when the grid barrier failed (timeout or abort).
__device__ inline bool layout_block(const Params& p, uint32_t* smem, int block, int num_blocks) {
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts;
  uint32_t* warp_expert = smem;                                                             // [kLayoutWarps][E]
  int32_t* expert_base = reinterpret_cast<int32_t*>(warp_expert + size_t(kLayoutWarps) * E);  // [E]
  __shared__ int32_t warp_rank[kLayoutWarps][kMaxRanks];
  __shared__ int32_t rank_base[kMaxRanks];
  __shared__ int32_t bad_entry;  // lowest token * K + k with a bad or repeated id

  const int threads = blockDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1;
  const int chunk = block * kLayoutThreads;
  const int warps = max(0, min(kLayoutWarps, (p.num_tokens - chunk + 31) / 32));  // warps with tokens
  for (int i = threadIdx.x; i < warps * E; i += threads) warp_expert[i] = 0;
  if (threadIdx.x == 0) bad_entry = INT32_MAX;
  __syncthreads();

  const int t = chunk + warp * 32 + lane;
  const bool has_token = warp < warps && t < p.num_tokens;
  // The token's ids and positions stay in registers (loops unrolled over kMaxTopk).
  int ids[kMaxTopk], pos[kMaxTopk], slot[kMaxRanks];
  unsigned dst_mask = 0;
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) ids[k] = has_token && k < K ? load_expert(p, t, k) : -1;
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) {
    if (!has_token || k >= K) break;  // unrolled with an exit: ids stay in registers
    int e = ids[k];
    bool ok = e >= -1 && e < E;
#pragma unroll
    for (int j = 0; j < k; ++j) ok = ok && !(e >= 0 && ids[j] == e);
    if (!ok) {
      atomicMin(&bad_entry, t * K + k);
      e = -1;
    }
    ids[k] = e;
    p.token_expert[size_t(t) * K + k] = e;
    if (e >= 0) {
      atomicOr(&warp_expert[warp * E + e], 1u << lane);
      dst_mask |= 1u << (e / Le);
    }
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
    if (lane == 0 && warp < kLayoutWarps) warp_rank[warp][r] = __popc(sent);
  }
  __syncthreads();
  // Exclusive scans over the block's warps (per expert, per rank); block totals.
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

  int bad = INT32_MAX;  // thread 0 of block 0: the lowest bad entry of all blocks
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
    bad = bad_entry;
  } else {
    // Publish this block's totals (experts, ranks, its first bad entry), meet the
    // other blocks, and turn everything into offsets over the lower blocks.
    const int stride = E + W + 1;
    int32_t* totals = p.layout_block_totals;
    for (int i = threadIdx.x; i < E; i += threads) totals[size_t(block) * stride + i] = expert_base[i];
    if (threadIdx.x < W) totals[size_t(block) * stride + E + threadIdx.x] = rank_base[threadIdx.x];
    if (threadIdx.x == 0) totals[size_t(block) * stride + E + W] = bad_entry;
    if (!layout_grid_barrier(p)) return false;
    for (int i = threadIdx.x; i < E + W; i += threads) {
      int below_blocks = 0, all_blocks = 0;
      for (int b = 0; b < num_blocks; ++b) {
        const int c = __ldcg(&totals[size_t(b) * stride + i]);
        below_blocks += b < block ? c : 0;
        all_blocks += c;
      }
      if (i < E) {
        expert_base[i] = below_blocks;
        if (block == 0) p.send_expert_count[i] = all_blocks;
      } else {
        rank_base[i - E] = below_blocks;
        if (block == 0) p.send_token_count[i - E] = all_blocks;
      }
    }
    if (block == 0 && threadIdx.x == 0)
      for (int b = 0; b < num_blocks; ++b) bad = min(bad, __ldcg(&totals[size_t(b) * stride + E + W]));
  }
  __syncthreads();
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
  if (block == 0 && threadIdx.x == 0) {
    *p.layout_error = bad != INT32_MAX;
    if (bad != INT32_MAX && p.status->code == kEpOk) {
      const int bt = bad / K, bk = bad % K;
      const int e = load_expert(p, bt, bk);
      p.status->token = bt;
      p.status->k = bk;
      p.status->value = e;
      __threadfence_system();
      p.status->code = (e < -1 || e >= E) ? kEpBadExpert : kEpRepeatedExpert;
    }
  }
  return true;
}

}  // namespace ferry::ep
