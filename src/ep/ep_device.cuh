// Device helpers shared by the EP kernels: epochs and flags, warp row copies,
// the fp8 quantizer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ep/ep_params.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"
#include "common/dependent_launch.hpp"
#include "ferry/device/sync.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/device/vec.cuh"

namespace ferry::ep {

// NOTE [EP epochs]
// Each EpBuffer counts completed launches of each kernel kind (dispatch send,
// dispatch receive, combine send, combine receive) in a device-local Epochs
// record, advanced by the last block of each launch. A call's send and receive
// halves both work on epoch n = (their counter) + 1, so CUDA graphs replay with
// no host bookkeeping, and the two halves may run concurrently (NOTE [Overlapped
// halves and free SMs]).
//  - Data readiness is per chunk of a token row: after a chunk's stores (data;
//    the routing record with the first chunk, NOTE [EP record once] in
//    dispatch.cu) the sending warp release-stores n into that chunk's ready
//    word (stage_ready / combine_ready); the receiving warp acquire-spins on it
//    (timeout primitive), so receivers consume chunks while the rest are still
//    in flight, and a row is spread over many warps when tokens are few.
//  - Dispatch reuse: guarded by the counts every send launch publishes first
//    (NOTE [EP direct rows] in dispatch.cu).
//  - Combine reuse: the partials a rank writes at epoch n land where the home
//    read at epoch n - 1. The home's last receive block stores n into the
//    sender's kCombineConsumed + home once every block is done reading; the
//    sender waits for n - 1 there before its first store. (The zero-copy
//    combine reads the rows where the caller wrote them instead: NOTE [EP
//    zero-copy combine] in rank_rows_pull_combine.cu.)
__device__ __forceinline__ uint64_t current_epoch(const Params& p, EpochKind kind) {
  const uint64_t* counters = &p.epochs->dispatch_sent;
  return *reinterpret_cast<const volatile uint64_t*>(counters + kind) + 1;
}

// NOTE [Overlapped halves and free SMs]
// dispatch() and combine() run the receive grid while the send grid runs. The
// receive grid waits for what send grids write (this rank's and its peers');
// a send grid never waits for a receive grid of the same call. So the halves
// progress on any number of free SMs (a user's kernels may hold the rest) as
// long as no receive block takes an SM a pending send block of this rank needs.
// Programmatic dependent launch (Hopper) gives exactly that: both grids go on
// the caller's stream, the receive grid with programmatic stream serialization
// allowed (launch_receive_grid), and every send block first executes
// griddepcontrol.launch_dependents (allow_receive_grid), so receive blocks are
// dispatched only once every send block is resident or done. The receive grid
// must not wait for the send grid at its start (it would lose the overlap), so
// it waits at its end, in finish_launch (griddepcontrol.wait: the send grid is
// complete and its memory visible), and the stream's next work, which waits
// for the receive grid, also comes after the send grid. Outside such a launch
// both instructions return at once. Where the runtime does not overlap them the
// halves just run one after the other. (A side stream with event fork/join did
// not give this: its receive blocks could take the free SMs before the send
// grid's, seen as a combine timeout with 3 free SMs in EpRestrictedSms.)
__device__ __forceinline__ void allow_receive_grid() { device::allow_dependent_launch(); }
__device__ __forceinline__ void wait_for_send_grid() { device::wait_prior_grid(); }

// Launches an EP kernel of p.num_blocks x kThreads; with p.overlapped_receive,
// as the dependent grid of the send grid before it on `stream`.
template <typename... Args>
void launch_receive_grid(void (*kernel)(Args...), const Params& p, size_t smem, cudaStream_t stream) {
  launch_dependent(kernel, dim3(p.num_blocks), dim3(kThreads), smem, stream, p.overlapped_receive, p);
}

// NOTE [EP last block]
// Block scope: true in the last block of the grid to get here. Every block's
// thread 0 counts its block in after a barrier (its threads' loads and stores
// before it).
//  - kSystemFence (the cross-node kernels, whose last block hands off to the
//    CPU proxy and reads what the other blocks wrote): a system-scope fence
//    before the count and a fence after it.
//  - Otherwise (every kernel inside a node): one acq_rel atomic at GPU scope.
//    Its release covers the block's earlier accesses (cumulativity through the
//    barrier), the last block's acquire orders all of them before whatever it
//    does next, and what it does next toward a peer is a system-scope release
//    store (NodeFlags::signal), cumulative in turn. So a peer that acquires that
//    signal sees every block's stores, with no system fence per block. The fence
//    (fence.sc.sys) held every block of a low-latency call for about a quarter
//    of its samples in combine_recv (Nsight Compute, 1 H200, world size 1).
template <bool kSystemFence>
__device__ __forceinline__ bool arrive_last(const Params& p, EpochKind kind) {
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) {
    if constexpr (kSystemFence) {
      __threadfence_system();
      last = atomicAdd(&p.epochs->blocks_done[kind], 1u) == gridDim.x - 1;
      __threadfence();
    } else {
      last = device::count_block_acq_rel(&p.epochs->blocks_done[kind]) == gridDim.x - 1;
    }
  }
  __syncthreads();
  return last;
}

// The last block, thread 0: the launch of `kind` is complete (NOTE [EP
// epochs]); resets the arrival count for the next launch.
__device__ __forceinline__ void publish_epoch(const Params& p, EpochKind kind, uint64_t epoch) {
  if (threadIdx.x == 0) {
    p.epochs->blocks_done[kind] = 0;
    (&p.epochs->dispatch_sent)[kind] = epoch;
    __threadfence();
  }
}

// The cross-node kernels' end: after the whole last block's sends.
__device__ __forceinline__ void advance_epoch(const Params& p, EpochKind kind, uint64_t epoch) {
  __syncthreads();
  publish_epoch(p, kind, epoch);
}

// The end of the kernels inside a node: the last block advances the counter of
// `kind`; with consumed_slot >= 0 it also tells every source it may reuse what
// this rank just read.
__device__ __forceinline__ void finish_launch(const Params& p, EpochKind kind, uint64_t epoch,
                                              int consumed_slot) {
  wait_for_send_grid();  // NOTE [Overlapped halves and free SMs]
  if (!arrive_last<false>(p, kind)) return;
  // Thread t < world stores epoch into word consumed_slot + rank of rank t (itself included).
  if (consumed_slot >= 0) p.flags.block_signal_row(size_t(consumed_slot), epoch, /*include_self=*/true);
  publish_epoch(p, kind, epoch);
}

// Threads [0, world) wait until flag slot + peer of this rank reaches `target`
// (the word from this rank itself included). Returns false for the whole block
// when any wait failed (timeout or abort). target 0 (the first combine) loads
// no flag. NodeFlags::block_wait_row has no such guard, and taking it with the
// guard around it cost combine_send_kernel 4 more bytes of spills (ptxas -v), so
// the row is walked here with NodeFlags::wait.
__device__ __forceinline__ bool wait_all_peers(const Params& p, int slot, uint64_t target, int32_t phase) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < p.world_size && target > 0) {
    if (!p.flags.wait(size_t(slot) + peer, target, p.wait, peer, phase)) failed = 1;
  }
  __syncthreads();
  return failed == 0;
}

// Lane 0 waits for a ready word; the warp then reads what it guards (the
// __syncwarp orders lane 0's acquire before the other lanes' loads).
__device__ __forceinline__ bool warp_wait_ready(const uint64_t* ready, uint64_t epoch, int peer, int32_t phase,
                                                const Params& p) {
  int ok = 1;
  if ((threadIdx.x & 31) == 0) ok = device::wait_flag_geq(ready, epoch, p.wait, peer, phase);
  ok = __shfl_sync(0xffffffffu, ok, 0);
  __syncwarp();
  return ok != 0;
}

// NOTE [EP record once] (the dispatch of dispatch.cu)
// In the direct path a token's routing record (source token, experts here,
// positions, weights) goes with its first chunk only; every chunk's warp used to
// store it (at T=128, 7 small stores per token and destination beside 1-2 KB
// chunks). So the warp receiving chunk c > 0 also acquires chunk 0's ready word
// (lane 1, beside lane 0's wait), whose release makes the record visible; chunk
// 0 has usually landed already. The staged path keeps a record per chunk.
__device__ __forceinline__ bool warp_wait_chunk_and_record(const uint64_t* ready, int c, uint64_t epoch, int source,
                                                           const Params& p) {
  const int lane = threadIdx.x & 31;
  int ok = 1;
  if (lane == 0 || (lane == 1 && c != 0))
    ok = device::wait_flag_geq(ready + (lane == 0 ? c : 0), epoch, p.wait, source, kPhaseEpDispatch);
  ok = __all_sync(0xffffffffu, ok);
  __syncwarp();
  return ok != 0;
}

// Inclusive prefix sum over the 32 lanes of a warp.
template <typename T>
__device__ __forceinline__ T warp_inclusive_sum(T value, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T below = __shfl_up_sync(0xffffffffu, value, d);
    if (lane >= d) value += below;
  }
  return value;
}

// Rows an expert with `rows` received rows takes in the output: low-latency
// slabs are fixed, high-throughput runs are padded to the expert alignment.
__device__ __forceinline__ int64_t expert_extent(const Params& p, int64_t rows) {
  if (p.low_latency) return p.capacity_per_expert;
  const int a = p.expert_alignment;
  return a == 1 ? rows : (rows + a - 1) / a * a;
}

// One warp: offsets[le] = first output row of local expert le (sum of the
// extents below it) for le in [0, n), from rows(le); returns the total extent.
// Lanes take 32 experts per step, a warp scan carries across steps.
template <typename RowsOf, typename Store>
__device__ __forceinline__ int64_t warp_expert_offsets(const Params& p, int n, int lane, RowsOf rows_of,
                                                       Store store) {
  int64_t carry = 0;
  for (int first = 0; first < n; first += 32) {
    const int le = first + lane;
    const int64_t extent = le < n ? expert_extent(p, rows_of(le)) : 0;
    const int64_t inclusive = warp_inclusive_sum(extent, lane);
    if (le < n) store(le, carry + inclusive - extent);
    carry += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  return carry;
}

// NOTE [EP item order]
// The data kernels hand out work items (token chunks) to warps with a
// grid-stride loop. Item i goes to warp i / grid of block i % grid (with
// p.spread_items), so a call with fewer items than warps spreads over every
// block, one SM each, instead of filling the first blocks: a low-latency call
// of 128 tokens in 4 chunks is 512 items against 132 x 32 warps, which the
// block-major order (item i to block i / 32) put on 16 SMs. With as many items
// as warps or more, both orders use every warp.
struct ItemLoop {
  int first, stride;
  __device__ explicit ItemLoop(const Params& p) : ItemLoop(p, int(blockIdx.x), int(gridDim.x)) {}
  // The items of block `block` of `blocks` (a subset of the grid's blocks).
  __device__ ItemLoop(const Params& p, int block, int blocks) : stride(blocks * kWarps) {
    const int warp = threadIdx.x >> 5;
    first = p.spread_items ? warp * blocks + block : block * kWarps + warp;
  }
};

// Items (source s, slot, chunk), interleaved across sources so warps walk the
// slots in about the order the sources fill them. decode() is false for a slot
// past that source's count.
struct ItemCursor {
  int world;
  int max_count;
  int num_chunks;
  __device__ bool decode(int item, const int32_t* counts, int& s, int& slot, int& chunk) const {
    chunk = item % num_chunks;
    const int pair = item / num_chunks;
    s = pair % world;
    slot = pair / world;
    return slot < counts[s];
  }
  __device__ int total() const { return world * max_count * num_chunks; }
};

// Columns [begin, end) of chunk c.
__device__ __forceinline__ int chunk_begin(const Params& p, int c) { return c * p.chunk_cols; }
__device__ __forceinline__ int chunk_end(const Params& p, int c) { return min(p.hidden, (c + 1) * p.chunk_cols); }

__device__ __forceinline__ int load_expert(const Params& p, int token, int k) {
  return p.idx_int64 ? static_cast<int>(static_cast<const int64_t*>(p.topk_idx)[size_t(token) * p.topk + k])
                     : static_cast<const int32_t*>(p.topk_idx)[size_t(token) * p.topk + k];
}

// ---------------------------------------------------------------- bf16 <-> fp32 packs

__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// ---------------------------------------------------------------- fp8 quantizer

// 448 is the largest finite e4m3 value; the floor keeps all-zero groups finite.
constexpr float kFp8Max = 448.0f;
constexpr float kMinAmax = 1e-4f;

// The largest |value| of eight bf16 values (one lane's 16 bytes), compared as
// bf16 pairs: fewer live registers than eight floats in the quantizer's loop.
__device__ __forceinline__ float amax_bf16x8(const uint4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  __nv_bfloat162 m = __habs2(h[0]);
#pragma unroll
  for (int i = 1; i < 4; ++i) m = __hmax2(m, __habs2(h[i]));
  return fmaxf(__low2float(m), __high2float(m));
}

// Eight bf16 values of one lane -> eight e4m3 bytes (round to nearest,
// saturating to the largest finite value), given the group's 1 / scale.
__device__ __forceinline__ uint2 quantize_bf16x8_fp8(const uint4& v, float inv_scale) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  uint2 out;
  __nv_fp8x2_storage_t* pairs = reinterpret_cast<__nv_fp8x2_storage_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    t.x *= inv_scale;
    t.y *= inv_scale;
    pairs[i] = __nv_cvt_float2_to_fp8x2(t, __NV_SATFINITE, __NV_E4M3);
  }
  return out;
}

}  // namespace ferry::ep
