// Layout: where each of this rank's tokens goes: the slot of every token at
// every destination rank and the index of every (token, k) among
// this rank's tokens of that expert, in token order, so every placement
// downstream is deterministic (rows of an expert ordered by source, then token).
#include <algorithm>

#include "ep/kernel_common.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

constexpr int kLayoutWarps = kLayoutThreads / 32;

// NOTE [EP layout scan]
// Block b takes tokens [b * kLayoutThreads, (b + 1) * kLayoutThreads), lane = token, warp =
// 32 consecutive tokens. Inside a warp everything is bit arithmetic: each lane
// ORs its bit into a per-warp shared mask per expert, so a token's index among
// the warp's tokens of expert e is popc(mask[e] below its lane) and the warp's
// count is popc(mask[e]); the slot at destination rank r comes from a ballot.
// An exclusive scan over the block's warps per expert and per rank gives
// offsets inside the block; the blocks then publish their totals, meet at a
// grid barrier (all blocks are resident: at most kMaxLayoutBlocks) and add the
// totals of lower blocks. Token order is kept: rows of one expert from one
// source are ordered by token index. A repeated expert in one token's row is an
// error (it would need two rows of the same token for one expert).
__device__ bool layout_grid_barrier(const Params& p) {
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

__global__ void __launch_bounds__(kLayoutThreads) layout_kernel(Params p) {
  extern __shared__ uint32_t smem[];
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts;
  uint32_t* warp_expert = smem;                                                         // [kLayoutWarps][E]
  int32_t* expert_base = reinterpret_cast<int32_t*>(warp_expert + size_t(kLayoutWarps) * E);  // [E]
  __shared__ int32_t warp_rank[kLayoutWarps][kMaxRanks];
  __shared__ int32_t rank_base[kMaxRanks];
  __shared__ int32_t bad_entry;  // lowest token * K + k with a bad or repeated id

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1;
  const int chunk = blockIdx.x * kLayoutThreads;
  const int warps = max(0, min(kLayoutWarps, (p.num_tokens - chunk + 31) / 32));  // warps with tokens
  for (int i = threadIdx.x; i < warps * E; i += kLayoutThreads) warp_expert[i] = 0;
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
    if (lane == 0) warp_rank[warp][r] = __popc(sent);
  }
  __syncthreads();
  // Exclusive scans over the block's warps (per expert, per rank); block totals.
  for (int e = threadIdx.x; e < E; e += kLayoutThreads) {
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

  // Publish this block's totals (experts, ranks, its first bad entry), meet the
  // other blocks, and turn everything into offsets over the lower blocks.
  const int stride = E + W + 1;
  int32_t* totals = p.layout_block_totals;
  for (int i = threadIdx.x; i < E; i += kLayoutThreads) totals[size_t(blockIdx.x) * stride + i] = expert_base[i];
  if (threadIdx.x < W) totals[size_t(blockIdx.x) * stride + E + threadIdx.x] = rank_base[threadIdx.x];
  if (threadIdx.x == 0) totals[size_t(blockIdx.x) * stride + E + W] = bad_entry;
  if (!layout_grid_barrier(p)) return;  // timed out or aborted: the host throws
  for (int i = threadIdx.x; i < E + W; i += kLayoutThreads) {
    int below_blocks = 0, all_blocks = 0;
    for (int b = 0; b < int(gridDim.x); ++b) {
      const int c = __ldcg(&totals[size_t(b) * stride + i]);
      below_blocks += b < int(blockIdx.x) ? c : 0;
      all_blocks += c;
    }
    if (i < E) {
      expert_base[i] = below_blocks;
      if (blockIdx.x == 0) p.send_expert_count[i] = all_blocks;
    } else {
      rank_base[i - E] = below_blocks;
      if (blockIdx.x == 0) p.send_token_count[i - E] = all_blocks;
    }
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
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int bad = INT32_MAX;
    for (int b = 0; b < int(gridDim.x); ++b) bad = min(bad, __ldcg(&totals[size_t(b) * stride + E + W]));
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
}

constexpr size_t layout_smem_bytes(int num_experts) {
  return sizeof(int32_t) * size_t(kLayoutWarps + 1) * num_experts;
}
static_assert(layout_smem_bytes(kMaxExperts) <= kDefaultSmemBytes, "no shared-memory opt-in needed");

}  // namespace


void check_layout_fits(int max_tokens, int num_experts, int num_sms) {
  const int blocks = std::max(1, (max_tokens + kLayoutThreads - 1) / kLayoutThreads);
  int per_sm = 0;
  FERRY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, layout_kernel, kLayoutThreads,
                                                                  layout_smem_bytes(num_experts)));
  FERRY_CHECK(blocks <= per_sm * num_sms, NotSupported,
              "EpBuffer: the routing layout of " << max_tokens << " tokens needs " << blocks
                                                 << " resident blocks but this GPU holds " << per_sm * num_sms
                                                 << "; lower max_tokens_per_rank");
}

void launch_layout(const Params& p, cudaStream_t stream) {
  const size_t smem = layout_smem_bytes(p.num_experts);
  const int blocks = std::max(1, (p.num_tokens + kLayoutThreads - 1) / kLayoutThreads);
  layout_kernel<<<blocks, kLayoutThreads, smem, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
