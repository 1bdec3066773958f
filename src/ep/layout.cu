// Layout: where each of this rank's tokens goes. One block computes the slot of
// every token at every destination rank and the index of every (token, k) among
// this rank's tokens of that expert, in token order, so every placement
// downstream is deterministic (rows of an expert ordered by source, then token).
#include "ep/kernel_common.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP layout scan]
// Tokens are taken in chunks of kThreads, lane = token, warp = 32 consecutive
// tokens. Inside a warp everything is bit arithmetic: each lane ORs its bit into
// a per-warp shared mask per expert, so a token's index among the warp's tokens
// of expert e is popc(mask[e] below its lane) and the warp's count is
// popc(mask[e]); the slot at destination rank r comes from a ballot. One
// exclusive scan over the chunk's warps per expert and per rank turns the warp
// counts into offsets (chunk totals carry over in expert_base / rank_base), and a
// last lane-parallel pass adds them. Token order is kept: rows of one expert
// from one source are ordered by token index. A repeated expert in one token's
// row is an error (it would need two rows of the same token for one expert).
__global__ void __launch_bounds__(kThreads, 1) layout_kernel(Params p) {
  extern __shared__ uint32_t smem[];
  const int E = p.num_experts, K = p.topk, W = p.world_size, Le = p.local_experts;
  uint32_t* warp_expert = smem;                                                  // [kWarps][E]: masks, then offsets
  int32_t* expert_base = reinterpret_cast<int32_t*>(warp_expert + size_t(kWarps) * E);  // [E]
  __shared__ int32_t warp_rank[kWarps][kMaxRanks];
  __shared__ int32_t rank_base[kMaxRanks];
  __shared__ int32_t bad_entry;  // lowest token * K + k with a bad or repeated id

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1;
  for (int e = threadIdx.x; e < E; e += kThreads) expert_base[e] = 0;
  if (threadIdx.x < kMaxRanks) rank_base[threadIdx.x] = 0;
  if (threadIdx.x == 0) bad_entry = INT32_MAX;

  for (int chunk = 0; chunk < p.num_tokens; chunk += kThreads) {
    const int warps = min(kWarps, (p.num_tokens - chunk + 31) / 32);  // warps with tokens
    for (int i = threadIdx.x; i < warps * E; i += kThreads) warp_expert[i] = 0;
    __syncthreads();
    const int first = chunk + warp * 32;
    const int t = first + lane;
    const bool has_token = warp < warps && t < p.num_tokens;
    // The token's ids and positions stay in registers (loops unrolled over kMaxTopk).
    int ids[kMaxTopk], pos[kMaxTopk], slot[kMaxRanks];
    unsigned dst_mask = 0;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) ids[k] = has_token && k < K ? load_expert(p, t, k) : -1;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) {
      if (!has_token || k >= K) continue;
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
      if (r >= W) break;
      const unsigned sent = __ballot_sync(0xffffffffu, (dst_mask >> r) & 1u);
      slot[r] = (sent >> lane) & 1u ? __popc(sent & below) : -1;
      if (lane == 0) warp_rank[warp][r] = __popc(sent);
    }
    __syncthreads();
    // Exclusive scans over warps (per expert, per rank), carrying chunk totals.
    for (int e = threadIdx.x; e < E; e += kThreads) {
      int run = expert_base[e];
      for (int w = 0; w < warps; ++w) {
        const int c = __popc(warp_expert[w * E + e]);
        warp_expert[w * E + e] = run;
        run += c;
      }
      expert_base[e] = run;
    }
    if (threadIdx.x < W) {
      int run = rank_base[threadIdx.x];
      for (int w = 0; w < warps; ++w) {
        const int c = warp_rank[w][threadIdx.x];
        warp_rank[w][threadIdx.x] = run;
        run += c;
      }
      rank_base[threadIdx.x] = run;
    }
    __syncthreads();
    if (has_token) {
#pragma unroll
      for (int k = 0; k < kMaxTopk; ++k)
        if (k < K) p.pos_in_expert[size_t(t) * K + k] = ids[k] >= 0 ? pos[k] + int32_t(warp_expert[warp * E + ids[k]]) : -1;
#pragma unroll
      for (int r = 0; r < kMaxRanks; ++r)
        if (r < W) p.token_slot[size_t(t) * W + r] = slot[r] >= 0 ? slot[r] + warp_rank[warp][r] : -1;
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
      const int e = load_expert(p, t, k);
      p.status->token = t;
      p.status->k = k;
      p.status->value = e;
      __threadfence_system();
      p.status->code = (e < -1 || e >= E) ? kEpBadExpert : kEpRepeatedExpert;
    }
  }
}

}  // namespace

size_t layout_smem_bytes(int num_experts) { return sizeof(int32_t) * size_t(kWarps + 1) * num_experts; }

void launch_layout(const Params& p, cudaStream_t stream) {
  const size_t smem = layout_smem_bytes(p.num_experts);
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
