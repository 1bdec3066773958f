// Layout: where each of this rank's tokens goes. One block computes, in token
// order, the slot of every token at every destination rank and the index of
// every (token, k) among this rank's tokens of that expert, so every placement
// downstream is deterministic (rows of an expert ordered by source, then token).
#include "ep/kernel_common.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP layout scan]
// Tokens are taken in chunks of kThreads: warp w owns 32 consecutive tokens,
// loads their ids into shared memory, and walks them one by one (lanes = the
// token's k entries), counting per warp in shared memory: rows per expert (warp_expert[w][e]) and tokens per destination
// (a lane-owned counter, lane r = rank r). Then one exclusive scan over warps per
// expert and per rank turns the per-warp counts into chunk offsets, and a last
// pass adds them. Chunk totals carry over in expert_base / rank_base.
__global__ void __launch_bounds__(kThreads, 1) layout_kernel(Params p) {
  extern __shared__ int32_t smem[];
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts;
  int32_t* warp_ids = smem;                                            // [kWarps][32 * K]
  int32_t* warp_expert = warp_ids + size_t(kThreads) * K;              // [kWarps][E]
  int32_t* expert_base = warp_expert + size_t(kWarps) * E;             // [E]
  __shared__ int32_t warp_rank[kWarps][kMaxRanks];
  __shared__ int32_t rank_base[kMaxRanks];
  __shared__ int32_t bad_entry;  // lowest token * K + k with a bad id

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t* ids = warp_ids + size_t(warp) * 32 * K;
  for (int e = threadIdx.x; e < E; e += kThreads) expert_base[e] = 0;
  if (threadIdx.x < kMaxRanks) rank_base[threadIdx.x] = 0;
  if (threadIdx.x == 0) bad_entry = INT32_MAX;

  for (int chunk = 0; chunk < p.num_tokens; chunk += kThreads) {
    for (int i = threadIdx.x; i < kWarps * E; i += kThreads) warp_expert[i] = 0;
    const int first = chunk + warp * 32;
    const int count = max(0, min(32, p.num_tokens - first));  // tokens of this warp
    // The warp's ids are contiguous in topk_idx: one coalesced load, checked.
    for (int i = lane; i < count * K; i += 32) {
      int e = load_expert(p, first + i / K, i % K);
      if (e < -1 || e >= E) {
        atomicMin(&bad_entry, first * K + i);
        e = -1;
      }
      ids[i] = e;
    }
    __syncthreads();
    int rank_count = 0;  // lane r: tokens of this warp going to rank r
    for (int j = 0; j < count; ++j) {
      const int t = first + j;
      const int e = lane < K ? ids[j * K + lane] : -1;
      const unsigned dst_mask = __reduce_or_sync(0xffffffffu, e >= 0 ? 1u << (e / Le) : 0u);
      if (lane < K) {
        p.pos_in_expert[size_t(t) * K + lane] = e >= 0 ? atomicAdd(&warp_expert[warp * E + e], 1) : -1;
        p.token_expert[size_t(t) * K + lane] = e;
      }
      if (lane < W) {
        const bool sent = (dst_mask >> lane) & 1u;
        p.token_slot[size_t(t) * W + lane] = sent ? rank_count : -1;
        rank_count += sent;
      }
    }
    if (lane < kMaxRanks) warp_rank[warp][lane] = lane < W ? rank_count : 0;
    __syncthreads();
    // Exclusive scans over warps (per expert, per rank), carrying chunk totals.
    for (int e = threadIdx.x; e < E; e += kThreads) {
      int run = expert_base[e];
      for (int w = 0; w < kWarps; ++w) {
        const int c = warp_expert[w * E + e];
        warp_expert[w * E + e] = run;
        run += c;
      }
      expert_base[e] = run;
    }
    if (threadIdx.x < W) {
      int run = rank_base[threadIdx.x];
      for (int w = 0; w < kWarps; ++w) {
        const int c = warp_rank[w][threadIdx.x];
        warp_rank[w][threadIdx.x] = run;
        run += c;
      }
      rank_base[threadIdx.x] = run;
    }
    __syncthreads();
    // Add the offsets: independent entries, lane-parallel and coalesced.
#pragma unroll 4
    for (int i = lane; i < count * K; i += 32) {
      const int e = ids[i];
      if (e >= 0) p.pos_in_expert[size_t(first) * K + i] += warp_expert[warp * E + e];
    }
#pragma unroll 4
    for (int i = lane; i < count * W; i += 32) {
      int32_t* slot = &p.token_slot[size_t(first) * W + i];
      const int32_t v = *slot;
      if (v >= 0) *slot = v + warp_rank[warp][i % W];
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < E; e += kThreads) p.send_expert_count[e] = expert_base[e];
  if (threadIdx.x < W) p.send_token_count[threadIdx.x] = rank_base[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    *p.layout_error = bad_entry != INT32_MAX;
    if (bad_entry != INT32_MAX && p.status->code == kEpOk) {
      const int t = bad_entry / K, k = bad_entry % K;
      p.status->token = t;
      p.status->k = k;
      p.status->value = load_expert(p, t, k);
      __threadfence_system();
      p.status->code = kEpBadExpert;
    }
  }
}

}  // namespace

size_t layout_smem_bytes(int num_experts, int topk) {
  return sizeof(int32_t) * (size_t(kThreads) * topk + size_t(kWarps + 1) * num_experts);
}

void launch_layout(const Params& p, cudaStream_t stream) {
  const size_t smem = layout_smem_bytes(p.num_experts, p.topk);
  static bool configured = false;  // opt in to large shared memory once per process
  if (!configured) {
    FERRY_CUDA_CHECK(cudaFuncSetAttribute(layout_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kLayoutMaxSmem)));
    configured = true;
  }
  layout_kernel<<<1, kThreads, smem, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
