// Row helpers shared by the EP kernels inside a node and across nodes (internode_dispatch.cu, internode_combine.cu).
// Row writers of the send kernels: copies of 16-byte units into
// several destination rows and the bf16 -> fp8 quantizer (the intranode send,
// dispatch.cu, and the cross-node pack, internode_dispatch.cu), and write_row_chunk, which
// picks between them by the call's types; every send path calls it.
#pragma once

#include "ep/ep_device.cuh"

namespace ferry::ep {

// 16-byte units in flight per lane in row copies. The send half keeps 8 (its
// loads feed NVLink stores); the receive half, whose copies are local, takes 4:
// with 8 the receive kernel spilled registers (64 a thread at 1024 threads),
// and on one H200 4 cut its time by 2-7% (bf16) and 6-9% (fp8)
// (docs/results/ep_1xH200_unroll_ab.txt).
constexpr int kSendUnroll = 8;
constexpr int kRecvUnroll = 4;

// copy_units_to_rows copies `units` 16-byte units from `src` to each of the `num_dst` rows whose
// base pointers are in `dst` (warp-uniform), at byte `offset` of each row,
// kUnits units per lane at a time (kVolatile: `src` is memory peers or the
// network write, read past L1): load_units (this lane's first kUnits of them into
// registers), then store_units_to_rows, per step. A caller may issue the first step's loads
// early (place_dispatch_records: NOTE [EP receive: loads in one round trip]).
template <int kUnits, bool kVolatile = false>
__device__ __forceinline__ void load_units(const uint8_t* src, int units, int lane, uint4 (&v)[kUnits]) {
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    const int i = u * 32 + lane;
    if (i < units) v[u] = kVolatile ? device::load16_volatile(src + size_t(i) * 16) : device::load16(src + size_t(i) * 16);
  }
}

// Stores what load_units loaded (the same `units`, `lane`) into each of the `num_dst` rows at byte `offset`.
template <int kUnits>
__device__ __forceinline__ void store_units_to_rows(uint8_t* const* dst, int num_dst, size_t offset, int units, int lane,
                                                    const uint4 (&v)[kUnits]) {
  for (int d = 0; d < num_dst; ++d) {
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int i = u * 32 + lane;
      if (i < units) device::store16(dst[d] + offset + size_t(i) * 16, v[u]);
    }
  }
}

template <int kUnits, bool kVolatile = false>
__device__ __forceinline__ void copy_units_to_rows(const uint8_t* src, uint8_t* const* dst, int num_dst,
                                                   size_t offset, int units, int lane) {
  for (int base = 0; base < units; base += 32 * kUnits) {
    uint4 v[kUnits];
    load_units<kUnits, kVolatile>(src + size_t(base) * 16, units - base, lane, v);
    store_units_to_rows<kUnits>(dst, num_dst, offset + size_t(base) * 16, units - base, lane, v);
  }
}

// The one-destination case of copy_units_to_rows, the destination in a register
// (the rank-rows combine's send half).
template <int kUnits>
__device__ __forceinline__ void copy_units(const uint8_t* src, uint8_t* dst, int units, int lane) {
  for (int base = 0; base < units; base += 32 * kUnits) {
    uint4 v[kUnits];
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int i = base + u * 32 + lane;
      if (i < units) v[u] = device::load16(src + size_t(i) * 16);
    }
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int i = base + u * 32 + lane;
      if (i < units) device::store16(dst + size_t(i) * 16, v[u]);
    }
  }
}

// Columns [begin, end) of a bf16 row -> fp8 in each destination row, plus one
// scale per 128 columns into each destination's scale row. begin is a multiple of 256.
// NOTE [EP fp8 wide stores]
// Lane = 16 columns (two 16-byte loads), so each lane stores its 16 fp8 bytes as
// one 16-byte store, as the bf16 copies do; 8 lanes = one scale group, reduced
// with shuffles, and the scale stores of a 512-column step go out as 4 adjacent
// words. With 8 columns a lane, each destination row took 8-byte stores, half
// the bytes per store instruction, toward a peer over NVLink. Like
// copy_units_to_rows, the loads of several steps are issued before any is
// quantized (kSendUnroll / 2 steps of two units: the same bytes in flight, the
// same registers).
__device__ __forceinline__ void quantize_to_rows(const uint8_t* src, uint8_t* const* dst, float* const* scales,
                                                 int num_dst, int begin, int end, int lane) {
  constexpr int kSteps = kSendUnroll / 2;
  for (int base = begin; base < end; base += 512 * kSteps) {
    uint4 v[kSteps][2];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int i = (base + u * 512) / 16 + lane;  // this lane's 16-column unit of step u
      const bool in = i * 16 < end;
      v[u][0] = in ? device::load16(src + size_t(i) * 32) : make_uint4(0, 0, 0, 0);
      v[u][1] = in ? device::load16(src + size_t(i) * 32 + 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int col = base + u * 512;
      if (col >= end) break;  // warp-uniform
      const int i = col / 16 + lane;
      // Zeros past the end: a whole 128-column group is in or out (H % 128 == 0).
      float amax = fmaxf(amax_bf16x8(v[u][0]), amax_bf16x8(v[u][1]));
#pragma unroll
      for (int m = 4; m >= 1; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
      const float scale = fmaxf(amax, kMinAmax) / kFp8Max;
      const uint2 low = quantize_bf16x8_fp8(v[u][0], 1.f / scale);
      const uint2 high = quantize_bf16x8_fp8(v[u][1], 1.f / scale);
      const uint4 q = make_uint4(low.x, low.y, high.x, high.y);
      if (i * 16 < end) {
        for (int d = 0; d < num_dst; ++d) {
          device::store16(dst[d] + size_t(i) * 16, q);
          if ((lane & 7) == 0) scales[d][i / 8] = scale;
        }
      }
    }
  }
}

// Columns [begin, end) of token t's row, in the dispatch type, into each of the
// `num_dst` rows whose bases are in `dst` (and, fp8, their scale rows in
// `dst_scales`): bf16 as is, bf16 quantized to fp8 (kQuantize), or fp8 input
// with its scales as is. begin is a multiple of 256 (chunk_cols).
// kQuantize: bf16 tokens sent as fp8 (a template parameter, not a branch: the
// quantizer and the copy loop in one kernel spilled registers under the 64 that
// a 1024-thread block allows; each alone does not).
template <bool kQuantize>
__device__ __forceinline__ void write_row_chunk(const Params& p, int t, int begin, int end, int lane,
                                                uint8_t* const* dst, float* const* dst_scales, int num_dst) {
  const int H = p.hidden, groups = H / kScaleBlock;
  if constexpr (kQuantize) {
    quantize_to_rows(static_cast<const uint8_t*>(p.tokens) + size_t(t) * H * 2, dst, dst_scales, num_dst, begin,
                     end, lane);
  } else if (p.fp8_in) {
    copy_units_to_rows<kSendUnroll>(static_cast<const uint8_t*>(p.tokens) + size_t(t) * H + begin, dst, num_dst,
                                    begin, (end - begin) / 16, lane);
    for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32) {
      const float scale = p.scales_in[size_t(t) * groups + g];
      for (int d = 0; d < num_dst; ++d) dst_scales[d][g] = scale;
    }
  } else {
    copy_units_to_rows<kSendUnroll>(static_cast<const uint8_t*>(p.tokens) + (size_t(t) * H + begin) * 2, dst,
                                    num_dst, size_t(begin) * 2, (end - begin) * 2 / 16, lane);
  }
}

// A sending warp's chunk c of token t: after the warp's destinations (dst, dst_scales, num_dst) are set, the rows'
// stores, then one release of the chunk's ready word per destination (lane d < num_dst holds destination d's in
// my_ready; NOTE [EP epochs]). The intranode direct and staged sends.
template <bool kQuantize>
__device__ __forceinline__ void write_chunk_and_release(const Params& p, int t, int c, int lane, uint8_t* const* dst,
                                                        float* const* dst_scales, int num_dst, uint64_t* my_ready,
                                                        uint64_t epoch) {
  __syncwarp();
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();  // the warp's stores before the releases
  if (lane < num_dst) device::st_release_sys(my_ready, epoch);
}

// The routing of token t a sending warp needs, one value per lane: lane d < world its slot at destination d (-1:
// not sent there); lane k < top-k its k-th expert (checked, -1: none), that expert's index among the source's
// tokens, and its weight. All loads at once (one memory round trip). The intranode sends (direct, staged and rank
// rows) and the cross-node pack; the hierarchical pack keeps its own copy (its SASS changes with this one: an
// A/B on 2x2 virtual nodes first).
struct TokenRouting {
  int slot, expert, pos;
  float weight;
};
__device__ __forceinline__ TokenRouting load_token_routing(const Params& p, int t, int lane) {
  const int W = p.world_size, K = p.topk;
  return {lane < W ? p.token_slot[size_t(t) * W + lane] : -1, lane < K ? p.token_expert[size_t(t) * K + lane] : -1,
          lane < K ? p.pos_in_expert[size_t(t) * K + lane] : -1,
          (lane < K && p.with_weights) ? p.topk_weights[size_t(t) * K + lane] : 1.f};
}

// Token t's routing record for destination rank r (Params::meta_bytes layout, meta_record_bytes): the source
// index, then per k the local expert at r (-1 elsewhere), the index among the source's tokens and the weight.
__device__ __forceinline__ void write_token_record(const Params& p, int32_t* record, const TokenRouting& routing,
                                                   int t, int r, int lane) {
  const int K = p.topk, Le = p.local_experts;
  const bool here = routing.expert >= 0 && routing.expert / Le == r;
  if (lane == 0) record[0] = t;
  if (lane < K) {
    record[1 + lane] = here ? routing.expert % Le : -1;
    record[1 + K + lane] = routing.pos;
    reinterpret_cast<float*>(record)[1 + 2 * K + lane] = routing.weight;
  }
}

// ---------------------------------------------------------------- combine
// Weighted sums of bf16 rows, shared by the intranode combine (combine.cu) and
// the cross-node one (internode_dispatch.cu, internode_combine.cu).
constexpr int kCombineUnroll = 4;  // 16-byte units (8 bf16) in flight per lane and source row

// acc += weight * the 8 bf16 values of v, one fmaf each (the combine's rounding wherever it sums).
__device__ __forceinline__ void fma_bf16x8(float (&acc)[8], float weight, const uint4& v) {
  float f[8];
  unpack_bf16x8(v, f);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[e] = fmaf(weight, f[e], acc[e]);
}

// acc[u] += weight * row[unit base + u * 32 + lane], for the kCombineUnroll units
// of this step (kVolatile: rows in memory the network writes, read past L1).
template <bool kVolatile = false>
__device__ __forceinline__ void accumulate_units(float (&acc)[kCombineUnroll][8], const uint8_t* row, float weight,
                                                 int base, int units, int lane) {
  uint4 v[kCombineUnroll];
#pragma unroll
  for (int u = 0; u < kCombineUnroll; ++u) {
    const int i = base + u * 32 + lane;
    if (i < units)
      v[u] = kVolatile ? device::load16_volatile(row + size_t(i) * 16) : device::load16(row + size_t(i) * 16);
  }
#pragma unroll
  for (int u = 0; u < kCombineUnroll; ++u) {
    const int i = base + u * 32 + lane;
    if (i < units) fma_bf16x8(acc[u], weight, v[u]);
  }
}

template <int kN = kCombineUnroll>
__device__ __forceinline__ void store_units(uint8_t* row, const float (&acc)[kN][8], int base, int units, int lane) {
#pragma unroll
  for (int u = 0; u < kN; ++u) {
    const int i = base + u * 32 + lane;
    if (i < units) device::store16(row + size_t(i) * 16, pack_bf16x8(acc[u]));
  }
}

// out = bf16(float(a) + float(b)) over `units` 16-byte units (a, b: bf16 rows, b
// may be null: out = a; both null: zeros), kSumUnroll units per lane and row in flight.
constexpr int kSumUnroll = 4;
__device__ __forceinline__ void sum_two_rows(const uint8_t* a, const uint8_t* b, uint8_t* out, int units, int lane) {
  for (int base = 0; base < units; base += 32 * kSumUnroll) {
    uint4 va[kSumUnroll], vb[kSumUnroll];
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int i = base + u * 32 + lane;
      va[u] = a != nullptr && i < units ? device::load16(a + size_t(i) * 16) : make_uint4(0, 0, 0, 0);
      vb[u] = b != nullptr && i < units ? device::load16(b + size_t(i) * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int i = base + u * 32 + lane;
      if (i >= units) continue;
      float fa[8], fb[8];
      unpack_bf16x8(va[u], fa);
      unpack_bf16x8(vb[u], fb);
#pragma unroll
      for (int j = 0; j < 8; ++j) fa[j] += fb[j];
      device::store16(out + size_t(i) * 16, pack_bf16x8(fa));
    }
  }
}

// out = the sum, in rank order (identical rounding on every path), of the rows row_of(r) for the ranks r in the
// mask `ranks` (a token chunk's rows, as pointers at the chunk; warp-uniform). The rank-rows combines (the copying
// one, rank_rows_combine.cu, and the pull, rank_rows_pull_combine.cu) both take it.
template <typename RowOf>
__device__ __forceinline__ void sum_rank_rows(unsigned ranks, RowOf row_of, uint8_t* out, int units, int lane) {
  if (__popc(ranks) <= 2) {
    // One or two rows (every token at W = 2): both rows' loads in flight at
    // once and no accumulator array, twice the bytes in flight per lane of
    // the loop below (64 registers a thread at 1024 threads bound it).
    const unsigned first = ranks & (0u - ranks);
    const uint8_t* a = ranks ? row_of(__ffs(ranks) - 1) : nullptr;
    const uint8_t* b = ranks != first ? row_of(__ffs(ranks & ~first) - 1) : nullptr;
    sum_two_rows(a, b, out, units, lane);
    return;
  }
  for (int base = 0; base < units; base += 32 * kCombineUnroll) {
    float acc[kCombineUnroll][8] = {};
    for (unsigned m = ranks; m != 0; m &= m - 1)  // rank order: identical rounding everywhere
      accumulate_units(acc, row_of(__ffs(m) - 1), 1.f, base, units, lane);
    store_units(out, acc, base, units, lane);
  }
}

// NOTE [EP combine L2 prefetch]
// A one-row-at-a-time warp keeps 4 x 16 bytes of a row per lane in flight (all a 1024-thread block's registers
// allow), so an SM reads at bytes in flight / load latency, and from HBM that latency is long. Lane 0 therefore
// asks the L2 for the row's next step (the next 32 x kCombineUnroll units) with a bulk prefetch
// (cp.async.bulk.prefetch.L2: no registers, no shared memory, no completion to wait for), so the register loads
// of the next step find their bytes in L2. At the step from unit 0 it asks for steps 1..kSteps, at every later
// step for the one kSteps ahead: each step once, none past the chunk. Only a hint: correctness never depends on
// it. Measured (session 26, c1, 2xH100, the one-role combine, T=4096): 1 step ahead 445.8 -> 394.6 us at 24 SMs,
// 1240.7 -> 1171.9 at 8, 331.0 -> 327.8 at 48; 2 and 4 steps ahead were slower at 48 SMs (366, 384 us: the
// prefetches then evict rows not yet read). On all 132 SMs one step ahead was slower too (c5: 361.2 us against
// 303.4 without): with that many warps reading, the loads are no longer short of bytes in flight and the extra
// L2 requests only compete. So the one-role combine prefetches only on grids of at most 48 blocks
// (FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS; session 27, c2, with against without: 0.888 / 0.905 / 0.916 / 0.920 /
// 0.940 / 0.965 / 0.994 at 24 / 28 / 32 / 36 / 40 / 44 / 48 SMs; 49-131 not measured). kSteps = 0: no prefetch.
template <int kSteps>
__device__ __forceinline__ void prefetch_row_steps_ahead(const uint8_t* row, int base, int units, int lane) {
  if constexpr (kSteps > 0) {
    constexpr int kStepUnits = 32 * kCombineUnroll;
    const int begin = base == 0 ? kStepUnits : base + kSteps * kStepUnits;
    const int end = min(units, base + (kSteps + 1) * kStepUnits);
    if (lane == 0 && begin < end)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row + size_t(begin) * 16),
                   "r"((end - begin) * 16)
                   : "memory");
  }
}

// acc[u] += weights[j] * rows[j][offset + unit base + u * 32 + lane] for j in [0, num_rows), one row at a time:
// an item's partial (combine_send_item; the one-role combine's own partial, combine.cu). kPrefetchSteps: NOTE
// [EP combine L2 prefetch].
template <int kPrefetchSteps = 0>
__device__ __forceinline__ void accumulate_item_rows(float (&acc)[kCombineUnroll][8], const uint8_t* const* rows,
                                                     const float* weights, int num_rows, size_t offset, int base,
                                                     int units, int lane) {
  for (int j = 0; j < num_rows; ++j) {
    prefetch_row_steps_ahead<kPrefetchSteps>(rows[j] + offset, base, units, lane);
    accumulate_units(acc, rows[j] + offset, weights[j], base, units, lane);
  }
}

// NOTE [EP combine rows in flight]
// A combine item sums num_rows expert rows (about top-k / world size of them). Loading one row's units, then
// summing them, then the next row's, keeps 4 x 16 bytes per lane in flight: on 23 SMs (the one-role combine)
// about 1 TB/s, where ferry-bench nvlink's register-load probe reads 1.5 TB/s with 4 sources in flight at once.
// So the rows go kCombineRowsAtOnce at a time, kCombineStepUnits units of each (the same 8 x 16 bytes per lane,
// half the accumulators of 4 units: ptxas keeps them in registers), and are summed in row order afterwards:
// every element sees the same fmaf chain as before, so the sums are bitwise unchanged.
constexpr int kCombineStepUnits = 2;
constexpr int kCombineRowsAtOnce = 4;

// acc[u] += weights[j] * rows[j][offset + unit base + u * 32 + lane] for j in [0, num_rows), in j order.
template <int kN, int kRows>
__device__ __forceinline__ void accumulate_rows(float (&acc)[kN][8], const uint8_t* const* rows, const float* weights,
                                                int num_rows, size_t offset, int base, int units, int lane) {
  for (int first = 0; first < num_rows; first += kRows) {
    uint4 v[kRows][kN];
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      if (first + q >= num_rows) break;
      const uint8_t* row = rows[first + q] + offset;
#pragma unroll
      for (int u = 0; u < kN; ++u) {
        const int i = base + u * 32 + lane;
        if (i < units) v[q][u] = device::load16(row + size_t(i) * 16);
      }
    }
#pragma unroll
    for (int q = 0; q < kRows; ++q) {
      if (first + q >= num_rows) break;
      const float weight = weights[first + q];
#pragma unroll
      for (int u = 0; u < kN; ++u) {
        const int i = base + u * 32 + lane;
        if (i < units) fma_bf16x8(acc[u], weight, v[q][u]);
      }
    }
  }
}

// Thread 0: how many tokens each source rank sent this rank, and the most, into
// the block's shared memory (read after the block's next barrier).
__device__ __forceinline__ void load_recv_counts(const Params& p, int32_t* token_count, int32_t& max_token_count) {
  if (threadIdx.x != 0) return;
  max_token_count = 0;
  for (int s = 0; s < p.world_size; ++s) {
    token_count[s] = p.recv_token_count[s];
    max_token_count = max(max_token_count, token_count[s]);
  }
}

// NOTE [EP slot weights]
// A received token's weights are kept twice: in out_weights by output row (the dispatch's output) and, with
// weights, beside slot_rows by (source, slot, k) (slot_weights). The combine reads the latter: its loads go out
// with slot_rows' instead of one L2 round trip after them (row -> out_weights[row]), on the path of every combine
// item. The dispatch receive halves write both (staged_dispatch.cu, dispatch.cu, internode_common.cuh).
__device__ __forceinline__ float* slot_weights(const Params& p) {
  return reinterpret_cast<float*>(p.slot_rows + size_t(p.world_size) * p.max_tokens * p.topk);
}

// A received token's weight for one of its experts here: by output row, and by (source, slot, k) (`pair`).
__device__ __forceinline__ void record_token_weight(const Params& p, int row, size_t pair, float weight) {
  p.out_weights[row] = weight;
  slot_weights(p)[pair] = weight;
}

// The expert output rows of received token `index` (source * max_tokens + slot) and their weights, in top-k
// order, into this warp's warp_rows / warp_weights (after a __syncwarp); returns how many.
__device__ __forceinline__ int gather_item_rows(const Params& p, size_t index, const uint8_t** warp_rows,
                                                float* warp_weights) {
  const int K = p.topk, lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(p.hidden) * 2;
  const uint8_t* outputs = static_cast<const uint8_t*>(p.expert_outputs);
  const int row = lane < K ? p.slot_rows[index * K + lane] : -1;
  const float weight = lane < K && p.with_weights ? slot_weights(p)[index * K + lane] : 1.f;  // NOTE [EP slot weights]
  const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
  int num_rows = 0;
  for (unsigned m = rows_mask; m != 0; m &= m - 1) {
    const int k = __ffs(m) - 1;
    if (lane == k) {
      warp_rows[num_rows] = outputs + size_t(row) * row_bytes;
      warp_weights[num_rows] = weight;
    }
    ++num_rows;
  }
  __syncwarp();
  return num_rows;
}

// One combine send item (source s, slot, chunk c): one warp sums the weighted
// outputs of the token's local experts (fp32) and stores the bf16 partial at
// target.row(s, slot, index) + the chunk's offset, then calls
// target.written(s, c, lane) after the warp's stores (__syncwarp: what a ready
// word's release orders, NOTE [EP epochs]). Where the row goes differs per path.
// warp_rows / warp_weights: this warp's row of the block's shared arrays.
// kRowsInFlight: NOTE [EP combine rows in flight], taken by the intranode two-role and low-latency combine. The
// one-role combine keeps one row at a time (its kernel also holds the home sum's registers: with rows in flight
// ptxas spilled 804 bytes there and it ran 3.6x slower); the cross-node ones too, until measured.
// kPrefetchSteps (one row at a time only): NOTE [EP combine L2 prefetch].
template <class Target, bool kRowsInFlight = false, int kPrefetchSteps = 0>
__device__ __forceinline__ void combine_send_item(const Params& p, int s, int slot, int c, Target& target,
                                                  const uint8_t** warp_rows, float* warp_weights) {
  const int lane = threadIdx.x & 31;
  const size_t index = size_t(s) * p.max_tokens + slot;
  const int num_rows = gather_item_rows(p, index, warp_rows, warp_weights);
  uint8_t* const row_start = target.row(s, slot, index);
  const size_t offset = size_t(chunk_begin(p, c)) * 2;
  const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
  uint8_t* dst = row_start + offset;
  if constexpr (kRowsInFlight) {  // NOTE [EP combine rows in flight]
    for (int base = 0; base < chunk_units; base += 32 * kCombineStepUnits) {
      float acc[kCombineStepUnits][8] = {};
      accumulate_rows<kCombineStepUnits, kCombineRowsAtOnce>(acc, warp_rows, warp_weights, num_rows, offset, base,
                                                             chunk_units, lane);
      store_units(dst, acc, base, chunk_units, lane);
    }
  } else {
    for (int base = 0; base < chunk_units; base += 32 * kCombineUnroll) {
      float acc[kCombineUnroll][8] = {};
      accumulate_item_rows<kPrefetchSteps>(acc, warp_rows, warp_weights, num_rows, offset, base, chunk_units, lane);
      store_units(dst, acc, base, chunk_units, lane);
    }
  }
  __syncwarp();  // the partial's stores, then target.written; warp_rows is rewritten by the next item
  target.written(s, c, lane);
}

// The combine send's item loop, shared by the intranode kernel and both
// cross-node ones: every item (combine_send_item) of this warp, in ItemLoop's
// order.
template <class Target, bool kRowsInFlight = false>
__device__ __forceinline__ void combine_send_items(const Params& p, const int32_t* token_count, int max_token_count,
                                                   Target& target) {
  __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
  __shared__ float warp_weights[kWarps][kMaxTopk];
  const int warp = threadIdx.x >> 5;
  const ItemCursor cursor{p.world_size, max_token_count, p.num_chunks};
  const ItemLoop loop(p);
  for (int item = loop.first; item < cursor.total(); item += loop.stride) {
    int s, slot, c;
    if (!cursor.decode(item, token_count, s, slot, c)) continue;
    combine_send_item<Target, kRowsInFlight>(p, s, slot, c, target, warp_rows[warp], warp_weights[warp]);
  }
}

}  // namespace ferry::ep
