// The expanded low-latency dispatch inside a node through staging rows (p.staged_rows): the send half moves
// every token's row and routing with no layout on the way, the receive half lays each source out itself.
// Protocol: NOTE [EP staged low latency] here, NOTE [EP epochs] in ep_device.cuh.
#include <algorithm>

#include "ep/ep_device.cuh"
#include "ep/ep_trace.cuh"
#include "ep/routing_layout.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/device/epoch_tag.hpp"

namespace ferry::ep {
namespace {

// NOTE [EP trace] points. Send: 0 start, 1 routing boxes stored (the last block), 2 layout done (block 0),
// 3 items done. Receive: 0 start, 1 every source's count seen, 2 sources laid out, 3 items done; inside 1 -> 2:
// 4 bitmaps made, 5 bits counted, 6 rows of lower sources.
FERRY_EP_TRACE_DEFINE(g_trace_staged_send)
FERRY_EP_TRACE_DEFINE(g_trace_staged_recv)

// NOTE [EP staged low latency]
// Low latency inside a node (p.staged_rows; FERRY_EP_LL_STAGED): nothing on a
// sender's path waits for a layout or for counts.
//  - Send: the last block first stores this rank's expert ids (T x K, as the
//    layout reads them) and its token count into its routing box at every rank
//    (StagedBox, ep_params.hpp) as entries tagged with the call's epoch (NOTE
//    [EP staged tagged boxes]: no barrier, no release). Every block but the
//    first sends each chunk of token t to the staging row (source, t) at every
//    rank one of its valid expert ids names (chunk 0 with the token's weights),
//    then releases that chunk's ready word. Block 0 meanwhile lays the call
//    out for this rank's own later use only (the combine's token_slot,
//    EpBuffer's check of the ids):
//    before (session 35, c5 trace, 2 H100s) the rows waited for it and for the
//    counts, 4.8 us at T=128 and 10.2 at T=512. (A grid of one block does all
//    three in that order.)
//  - Receive: every block waits for every source's token count, then for each
//    token's ids (their tags), and lays out all the sources' tokens for this
//    rank's local experts itself, in shared memory:
//    per (source, local expert) a bitmap of the tokens that picked it and each
//    word's count of lower bits, per source the same for its tokens with an
//    expert here. That gives the counts, the expert offsets, and for token t of
//    source s at local expert le the row offset(le) + rows of lower sources +
//    set bits of (s, le) below t, and its slot (index among s's tokens with an
//    expert here, the combine's order) likewise: the same rows and slots the
//    layout on the sender would give. A source whose ids hold a bad one (out of
//    range, or an expert repeated in a token: the layout's rule) counts as
//    sending nothing, as its own layout_error makes it send nothing elsewhere.
//    Per landed chunk, a warp copies it into every row of its token's experts.
//  So the rows cross NVLink from the kernels' start, and the layout runs beside
//  them on every receive block, from ids that land a few microseconds in.
// Reuse: boxes, staging rows and ready words alternate by epoch parity ([2
// parity][W source], staged_index / routing_box). Rank s writes parity n & 1 at
// rank r in dispatch n only after its receive half of dispatch n - 1 (stream
// order) saw r's box of n - 1, which r stored when its send half of n - 1
// started, after (stream order: complete, its loads returned) its receive half
// of n - 2, the last reader of that parity; so no release is needed for that.
// Every rank stores its box's count at every rank in every call. The
// output rows are written by their own rank only, after its previous call (the
// API contract); the combine's staging has its own guard (NOTE [EP epochs]).
__device__ __forceinline__ size_t staged_index(const Params& p, uint64_t epoch, int source, int token) {
  return (size_t(epoch & 1) * p.world_size + source) * p.max_tokens + token;
}

// Source `source`'s routing box at rank r, for the parity of `epoch`, and its parts (StagedBox).
__device__ __forceinline__ uint8_t* routing_box(const Params& p, int r, uint64_t epoch, int source) {
  return p.stage_boxes.at(r) + (size_t(epoch & 1) * p.world_size + source) * p.stage_box_bytes;
}
// NOTE [EP staged tagged boxes]
// Every entry of a routing box carries its call's epoch tag (NOTE [Epoch tags]) in its high half, so a receiver knows an
// entry is this call's by the entry alone: the sender stores the entries with no barrier and no release after them
// (a system-scope release after a block barrier took the box's block 10 us at T=512 in session 36's c5 trace, the
// rows' NVLink traffic of the other blocks in flight), and the receiver spins on each entry it reads. Stores and
// loads are relaxed at system scope (st_relaxed_sys_v2, ld_relaxed_sys), so each entry is one strong 8-byte access
// on both sides, never a data race, and the tag and ids of an entry are read together or not at all. An entry
// of the same parity from an earlier call carries an older epoch's tag, never this one's (NOTE [Epoch tags]). Two
// 16-bit ids share an entry, so the box holds as many bytes as the ids alone took untagged; the weights travel in
// the staging rows instead (chunk 0's, under its ready word). No order is needed between a box and the staging
// rows: a receiver reads a row only after that row's own ready word.
__device__ __forceinline__ uint64_t box_tag(uint64_t epoch) { return uint64_t(device::epoch_tag32(epoch)) << 32; }
__device__ __forceinline__ bool tagged(uint64_t entry, uint64_t tag) {
  return (entry & ~uint64_t(0xffffffffu)) == tag;
}
__device__ __forceinline__ uint64_t* box_count(uint8_t* box) { return reinterpret_cast<uint64_t*>(box); }
__device__ __forceinline__ uint64_t* box_ids(uint8_t* box) {
  return reinterpret_cast<uint64_t*>(box + StagedBox::kEntriesOffset);
}
// An id as its box stores it: 16 bits, with any id outside [-1, E) as kBadBoxId (>= E, so still bad).
constexpr int kBadBoxId = 0x7fff;
static_assert(kMaxExperts < kBadBoxId, "box ids fit 16 bits");
__device__ __forceinline__ uint32_t box_id_bits(int e, int num_experts) {
  return uint32_t(e >= -1 && e < num_experts ? e : kBadBoxId) & 0xffffu;
}
// Id `half` (0, 1) of an entry's two.
__device__ __forceinline__ int box_entry_id(uint64_t entry, int half) {
  return int(int16_t(uint16_t(entry >> (16 * half))));
}
// Token t's weights in a staging row (written with chunk 0).
__device__ __forceinline__ float* staged_weights(const Params& p, uint8_t* staged_row) {
  return reinterpret_cast<float*>(staged_row + stage_weights_offset(p.hidden, p.fp8_out));
}

// Spins (the timeout primitive) until the entry at `entry` is this call's (its tag); returns its value's low half.
__device__ __forceinline__ bool wait_box_entry(const uint64_t* entry, uint64_t tag, const Params& p, int source,
                                               uint32_t& value) {
  uint64_t seen = 0;
  const bool ok = device::spin_wait(
      [&](uint64_t& observed) {
        seen = device::ld_relaxed_sys(entry);
        observed = seen >> 32;
        return tagged(seen, tag);
      },
      p.wait, source, kPhaseEpDispatch, tag >> 32);
  value = uint32_t(seen);
  return ok;
}

// Expert id k of token t: topk_idx's (an int64 id cast to int, as the layout reads it), or where the call reuses a
// layout (topk_idx may be absent), the layout's checked one (-1 for none or bad).
__device__ __forceinline__ int routed_expert(const Params& p, int t, int k) {
  return p.reuses_layout ? p.token_expert[size_t(t) * p.topk + k] : load_expert(p, t, k);
}

// The last block of the send grid: this rank's ids and token count (none where a reused layout holds a bad id:
// nothing is sent then) into its box at every rank, as tagged entries (NOTE [EP staged tagged boxes]), two
// entries a thread in one 16-byte store (a pair past the call's entries carries junk that no receiver reads).
__device__ void send_routing_boxes(const Params& p, uint64_t epoch, bool bad) {
  const int W = p.world_size, K = p.topk, per_token = StagedBox::entry_count(K);
  const int n = bad ? 0 : p.num_tokens * per_token;
  const uint64_t tag = box_tag(epoch);
  for (int first = 2 * int(threadIdx.x); first < n; first += 2 * kThreads) {
    uint64_t entry[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = min(first + j, n - 1), t = i / per_token, k = 2 * (i % per_token);
      const uint32_t low = box_id_bits(routed_expert(p, t, k), p.num_experts);
      const uint32_t high = k + 1 < K ? box_id_bits(routed_expert(p, t, k + 1), p.num_experts) : 0xffffu;
      entry[j] = tag | (uint64_t(high) << 16) | low;
    }
    for (int r = 0; r < W; ++r)
      device::st_relaxed_sys_v2(box_ids(routing_box(p, r, epoch, p.rank)) + first, entry[0], entry[1]);
  }
  if (threadIdx.x < W)
    device::st_relaxed_sys(box_count(routing_box(p, int(threadIdx.x), epoch, p.rank)),
                           tag | uint32_t(bad ? 0 : p.num_tokens));
}

// One chunk of token t into its staging row (source p.rank, token t) at every rank its valid expert ids name, then
// the chunk's ready word there; fp8 scales follow the row's data in the staging row, then (chunk 0) the weights.
template <bool kQuantize>
__device__ void send_staged_chunk(const Params& p, int t, int c, int lane, uint8_t** dst, float** dst_scales,
                                  uint64_t epoch) {
  const int e = lane < p.topk ? routed_expert(p, t, lane) : -1;
  const unsigned rank_bit = e >= 0 && e < p.num_experts ? 1u << (e / p.local_experts) : 0u;
  const unsigned dst_mask = __reduce_or_sync(0xffffffffu, rank_bit);
  if (dst_mask == 0) return;
  const size_t index = staged_index(p, epoch, p.rank, t);
  int num_dst = 0;
  uint64_t* my_ready = nullptr;  // lane d: ready word of destination d
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    if (lane == num_dst) my_ready = p.stage_ready.at(r) + index * p.num_chunks + c;
    if (lane == 0) {
      uint8_t* row = p.stage_rows.at(r) + index * p.stage_row_bytes;
      dst[num_dst] = row;
      dst_scales[num_dst] = reinterpret_cast<float*>(row + p.hidden);  // fp8 only
    }
    ++num_dst;
  }
  if (c == 0 && p.with_weights) {
    __syncwarp();  // dst from lane 0; the weights go out under chunk 0's release, as its data
    if (lane < p.topk) {
      const float weight = p.topk_weights[size_t(t) * p.topk + lane];
      for (int d = 0; d < num_dst; ++d) staged_weights(p, dst[d])[lane] = weight;
    }
  }
  write_chunk_and_release<kQuantize>(p, t, c, lane, dst, dst_scales, num_dst, my_ready, epoch);
}

template <bool kQuantize, bool kPairLayout>
__global__ void __launch_bounds__(kThreads, 1) staged_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  extern __shared__ __align__(16) uint8_t send_smem[];
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  FERRY_EP_TRACE_POINT(g_trace_staged_send, 0);
  // A reused layout (no layout here) is known now: one with a bad id sends nothing (EpBuffer reports it).
  const bool bad = p.reuses_layout && *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
  // The boxes from the last block, before its chunks, so block 0's layout runs beside them (one block: both).
  if (blockIdx.x == gridDim.x - 1) send_routing_boxes(p, epoch, bad);
  FERRY_EP_TRACE_POINT(g_trace_staged_send, 1);
  if (blockIdx.x == 0) {
    if constexpr (kPairLayout) {
      layout_block_of_pairs(p, reinterpret_cast<uint32_t*>(send_smem));
    } else if (p.fuse_layout) {
      layout_block(p, reinterpret_cast<uint32_t*>(send_smem), 0, 1, fused_layout_block_tokens(p.num_tokens));
    }
    FERRY_EP_TRACE_POINT(g_trace_staged_send, 2);
  }
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  if ((blockIdx.x > 0 || gridDim.x == 1) && !bad) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop = gridDim.x > 1 ? ItemLoop(p, int(blockIdx.x) - 1, int(gridDim.x) - 1) : ItemLoop(p);
    for (int item = loop.first; item < items; item += loop.stride)
      send_staged_chunk<kQuantize>(p, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp],
                                   warp_scales[warp], epoch);
  }
  FERRY_EP_TRACE_POINT(g_trace_staged_send, 3);
  FERRY_EP_TRACE_REPORT(g_trace_staged_send, "staged_send", p, epoch, 4);
  finish_launch(p, kDispatchSend, epoch, -1);
}

// The receive block's layout of every source in dynamic shared memory (NOTE [EP staged low latency]); words:
// 32-token words of max_tokens. Each (source, expert) bitmap is `stride` words apart, words rounded up to odd, so
// that the threads of a warp, one bitmap each, walking them word by word hit 32 different banks (with an even
// count of words, e.g. 16 at T=512, they hit 2 banks: a 16-way conflict in every step of count_source_tokens).
__host__ __device__ constexpr int staged_layout_stride(int words) { return words | 1; }
struct StagedLayout {
  uint32_t* expert_mask;     // [W][Le][stride]: tokens of source s that picked local expert le
  uint32_t* token_mask;      // [W][stride]: tokens of s with an expert here (right after expert_mask)
  int32_t* base;             // [W][Le]: rows of (s, le) from lower sources
  uint16_t* expert_before;   // [W][Le][stride]: set bits of expert_mask in the lower words
  uint16_t* token_before;    // [W][stride]: the same for token_mask
  int stride;
  __device__ StagedLayout(uint8_t* smem, int W, int Le, int words) : stride(staged_layout_stride(words)) {
    const size_t E = size_t(W) * Le;
    expert_mask = reinterpret_cast<uint32_t*>(smem);
    token_mask = expert_mask + E * stride;
    base = reinterpret_cast<int32_t*>(token_mask + size_t(W) * stride);
    expert_before = reinterpret_cast<uint16_t*>(base + E);
    token_before = expert_before + E * stride;
  }
  // Word w of the bitmap of (source s, local expert le), and of source s's tokens here.
  __device__ size_t expert_word(int s, int Le, int le, int w) const { return (size_t(s) * Le + le) * stride + w; }
  __device__ size_t token_word(int s, int w) const { return size_t(s) * stride + w; }
};

constexpr size_t staged_recv_smem_bytes(int world_size, int num_experts, int max_tokens) {
  const size_t stride = staged_layout_stride((max_tokens + 31) / 32), E = num_experts, W = world_size;
  return (sizeof(uint32_t) + sizeof(uint16_t)) * (E + W) * stride + sizeof(int32_t) * E;
}
// With its static arrays (warp_dst, a few words) the receive kernel stays in the 48 KB a kernel gets without
// opting in.
constexpr size_t kStagedRecvSmemLimit = 40 * 1024;
static_assert(kStagedRecvSmemLimit + sizeof(void*) * kWarps * kMaxTopk + 256 <= kDefaultSmemBytes,
              "no shared-memory opt-in needed");

// Token t's K ids from its box entries, this call's (NOTE [EP staged tagged boxes]): every entry loaded at once,
// then, if one was not in yet, all again until they are. False: a wait failed (timeout or abort: the host reports).
__device__ __forceinline__ bool load_box_ids(const Params& p, const uint64_t* entries, uint64_t tag, int source,
                                             int (&ids)[kMaxTopk]) {
  const auto load_all = [&]() {
    bool all = true;
#pragma unroll
    for (int j = 0; j < kMaxTopk / 2; ++j) {
      ids[2 * j] = ids[2 * j + 1] = -1;
      if (2 * j >= p.topk) continue;
      const uint64_t entry = device::ld_relaxed_sys(entries + j);
      ids[2 * j] = box_entry_id(entry, 0);
      if (2 * j + 1 < p.topk) ids[2 * j + 1] = box_entry_id(entry, 1);
      all &= tagged(entry, tag);
    }
    return all;
  };
  if (load_all()) return true;
  return device::spin_wait([&](uint64_t&) { return load_all(); }, p.wait, source, kPhaseEpDispatch, tag >> 32);
}

// Every block: the bitmaps of every source's tokens from the boxes (bad[s]: a bad id in source s). One thread per
// token, its ids checked in registers (the layout's rule: out of range, or repeated). *failed: a wait failed.
__device__ void map_source_tokens(const Params& p, const StagedLayout& lay, uint64_t epoch, const int32_t* token_count,
                                  int32_t* bad, int* failed) {
  const int K = p.topk, E = p.num_experts, Le = p.local_experts, mine = p.rank * Le;
  const int per_token = StagedBox::entry_count(K);
  const uint64_t tag = box_tag(epoch);
  for (int i = threadIdx.x; i < p.world_size * p.max_tokens; i += kThreads) {
    const int s = i / p.max_tokens, t = i % p.max_tokens;
    if (t >= token_count[s]) continue;
    int ids[kMaxTopk];
    if (!load_box_ids(p, box_ids(routing_box(p, p.rank, epoch, s)) + size_t(t) * per_token, tag, s, ids)) {
      *failed = 1;
      return;
    }
    bool ok = true;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) {
      ok &= ids[k] >= -1 && ids[k] < E;
#pragma unroll
      for (int j = 0; j < k; ++j) ok &= ids[k] < 0 || ids[j] != ids[k];
    }
    const uint32_t bit = 1u << (t & 31);
    bool here = false;
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) {
      if (ids[k] >= mine && ids[k] < mine + Le) {
        atomicOr(&lay.expert_mask[lay.expert_word(s, Le, ids[k] - mine, t >> 5)], bit);
        here = true;
      }
    }
    if (!ok) bad[s] = 1;
    if (here) atomicOr(&lay.token_mask[lay.token_word(s, t >> 5)], bit);
  }
}

// Every block: the bits below each word, then the rows of (s, le) (into base) and the tokens of s with an expert
// here (into recv_count); a bad source counts nothing.
__device__ void count_source_tokens(const Params& p, const StagedLayout& lay, int words, const int32_t* bad,
                                    int32_t* recv_count) {
  const int W = p.world_size, E = p.num_experts, Le = p.local_experts;
  for (int j = threadIdx.x; j < E + W; j += kThreads) {
    const int s = j < E ? j / Le : j - E;
    const uint32_t* mask = lay.expert_mask + size_t(j) * lay.stride;  // token_mask follows expert_mask
    uint16_t* before = lay.expert_before + size_t(j) * lay.stride;    // token_before follows expert_before
    int run = 0;
    for (int w = 0; w < words; ++w) {
      before[w] = uint16_t(run);
      run += __popc(mask[w]);
    }
    if (bad[s]) run = 0;
    if (j < E)
      lay.base[j] = run;
    else
      recv_count[s] = run;
  }
}

// The receive half of NOTE [EP staged low latency]: one landed chunk of a staging row into every output row of
// the token's experts here (lane k: its row or -1; rows_mask: the lanes with a row).
__device__ __forceinline__ void copy_staged_chunk(const Params& p, const uint8_t* staged_row, unsigned rows_mask,
                                                  int row, int c, uint8_t** dst, int lane) {
  if (rows_mask == 0) return;
  const int H = p.hidden, elem = p.fp8_out ? 1 : 2, groups = H / kScaleBlock;
  int num_rows = 0;
  for (unsigned m = rows_mask; m != 0; m &= m - 1) {
    const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
    if (lane == 0) dst[num_rows] = p.out_tokens + size_t(r) * H * elem;
    ++num_rows;
  }
  __syncwarp();
  const int begin = chunk_begin(p, c), end = chunk_end(p, c);
  copy_units_to_rows<kRecvUnroll>(staged_row + size_t(begin) * elem, dst, num_rows, size_t(begin) * elem,
                                  (end - begin) * elem / 16, lane);
  if (p.fp8_out) {
    const float* staged_scales = reinterpret_cast<const float*>(staged_row + H);
    for (unsigned m = rows_mask; m != 0; m &= m - 1) {
      const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
      for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32)
        p.out_scales[size_t(r) * groups + g] = staged_scales[g];
    }
  }
  __syncwarp();  // dst is rewritten by the warp's next item; the chunk's reads before its discard
  // The chunk is consumed (one warp reads it): its whole lines leave L2 unwritten (the scales' stay).
  device::discard_l2_lines(staged_row + size_t(begin) * elem, staged_row + size_t(end) * elem, lane);
}

__global__ void __launch_bounds__(kThreads, 1) staged_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int W = p.world_size, Le = p.local_experts, K = p.topk, E = p.num_experts;
  const int words = (p.max_tokens + 31) / 32, mine = p.rank * Le;
  extern __shared__ __align__(16) uint8_t recv_smem[];
  const StagedLayout lay(recv_smem, W, Le, words);
  __shared__ int32_t token_count[kMaxRanks];  // tokens in source s's box (0 for a bad source; -1: no box)
  __shared__ int32_t recv_count[kMaxRanks];   // tokens of s with an expert here
  __shared__ int32_t bad[kMaxRanks];
  __shared__ int32_t max_token_count;
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 0);
  for (int i = threadIdx.x; i < (E + W) * lay.stride; i += kThreads) lay.expert_mask[i] = 0;  // and token_mask
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  if (threadIdx.x < W) {
    bad[threadIdx.x] = 0;
    uint32_t tokens = 0;
    const bool in = wait_box_entry(box_count(routing_box(p, p.rank, epoch, int(threadIdx.x))), box_tag(epoch), p,
                                   int(threadIdx.x), tokens);
    token_count[threadIdx.x] = in ? int32_t(tokens) : -1;
  }
  __syncthreads();
  for (int s = 0; s < W; ++s)
    if (token_count[s] < 0) return;  // aborted or timed out: the host throws
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 1);
  map_source_tokens(p, lay, epoch, token_count, bad, &failed);
  __syncthreads();
  if (*reinterpret_cast<volatile int*>(&failed) != 0) return;  // the host throws
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 4);
  count_source_tokens(p, lay, words, bad, recv_count);
  __syncthreads();
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 5);
  // Low latency (the only mode that stages): expert le's rows start at le x capacity_per_expert, whatever the
  // counts, so the offsets need no scan (a warp scan over the experts here took ~2 us in session 36's c5 trace).
  const int64_t capacity = p.capacity_per_expert;
  for (int le = threadIdx.x; le < Le; le += kThreads) {
    int run = 0;
    for (int s = 0; s < W; ++s) {
      const int rows = lay.base[s * Le + le];
      lay.base[s * Le + le] = run;
      run += rows;
    }
    if (blockIdx.x == 0) {
      p.expert_counts[le] = run;
      p.expert_offsets[le] = le * capacity;
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 6);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp == 0) {
    const int count = lane < W ? (bad[lane] ? 0 : token_count[lane]) : 0;
    if (lane < W) token_count[lane] = count;
    const int most = __reduce_max_sync(0xffffffffu, count);
    if (lane == 0) max_token_count = most;
  }
  __syncthreads();
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 2);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) p.expert_offsets[Le] = Le * capacity;
    if (threadIdx.x < W) p.recv_token_count[threadIdx.x] = recv_count[threadIdx.x];
  }
  __shared__ uint8_t* warp_dst[kWarps][kMaxTopk];
  // Items (source s, token t, chunk): a token with no expert here is skipped.
  const ItemCursor cursor{W, max_token_count, p.num_chunks};
  const ItemLoop loop(p);
  for (int item = loop.first; item < cursor.total(); item += loop.stride) {
    int s, t, c;
    if (!cursor.decode(item, token_count, s, t, c)) continue;
    const int w = t >> 5;
    const uint32_t below = (1u << (t & 31)) - 1u, token_word = lay.token_mask[lay.token_word(s, w)];
    if (((token_word >> (t & 31)) & 1u) == 0) continue;
    const int slot = lay.token_before[lay.token_word(s, w)] + __popc(token_word & below);
    const size_t index = size_t(s) * p.max_tokens + slot;  // the combine's (source, slot)
    const size_t staged = staged_index(p, epoch, s, t);
    if (!warp_wait_ready(p.stage_ready.at(p.rank) + staged * p.num_chunks + c, epoch, s, kPhaseEpDispatch, p)) break;
    uint8_t* staged_row = p.stage_rows.at(p.rank) + staged * p.stage_row_bytes;
    int row = -1;
    if (lane < K) {
      // A thread of this block saw this call's entry in map_source_tokens, before a block barrier: a strong load
      // now reads it or a later write (coherence), and no later write comes before this call's end.
      const uint64_t entry = device::ld_relaxed_sys(box_ids(routing_box(p, p.rank, epoch, s)) +
                                                    size_t(t) * StagedBox::entry_count(K) + lane / 2);
      const int e = box_entry_id(entry, lane & 1);
      if (e >= mine && e < mine + Le) {
        const int le = e - mine;
        const size_t at = lay.expert_word(s, Le, le, w);
        row = int(le * capacity) + lay.base[s * Le + le] + lay.expert_before[at] +
              __popc(lay.expert_mask[at] & below);
      }
      if (c == 0) {  // the token's bookkeeping, once (its weights came with chunk 0)
        if (row >= 0 && p.with_weights)  // NOTE [EP slot weights]
          record_token_weight(p, row, index * K + lane, staged_weights(p, staged_row)[lane]);
        p.slot_rows[index * K + lane] = row;
      }
    }
    if (lane == 0 && c == 0) p.slot_src_token[index] = t;
    const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
    copy_staged_chunk(p, staged_row, rows_mask, row, c, warp_dst[warp], lane);
  }
  FERRY_EP_TRACE_POINT(g_trace_staged_recv, 3);
  FERRY_EP_TRACE_REPORT(g_trace_staged_recv, "staged_recv", p, epoch, 7);
  finish_launch(p, kDispatchRecv, epoch, -1);
}

using SendKernel = void (*)(Params);
// By [quantize][pair layout] (NOTE [EP pair layout]).
constexpr SendKernel kStagedSendKernels[2][2] = {{staged_send_kernel<false, false>, staged_send_kernel<false, true>},
                                                 {staged_send_kernel<true, false>, staged_send_kernel<true, true>}};

}  // namespace

bool staged_receive_fits(int world_size, int num_experts, int max_tokens) {
  return staged_recv_smem_bytes(world_size, num_experts, max_tokens) <= kStagedRecvSmemLimit;
}

void load_staged_dispatch_kernels() {
  for (const auto& by_layout : kStagedSendKernels) load_kernels(by_layout[0], by_layout[1]);
  load_kernels(staged_recv_kernel);
}

void launch_staged_dispatch_send(const Params& p, cudaStream_t stream) {
  const SendKernel kernel = kStagedSendKernels[quantizes(p)][takes_pair_layout(p)];
  kernel<<<p.num_blocks, kThreads, fused_layout_send_smem_bytes(p), stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_staged_dispatch_recv(const Params& p, cudaStream_t stream) {
  launch_receive_grid(staged_recv_kernel, p, staged_recv_smem_bytes(p.world_size, p.num_experts, p.max_tokens),
                      stream);
}

}  // namespace ferry::ep
