// Device helpers shared by the EP kernels: epochs and flags, warp row copies,
// the fp8 quantizer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ep/ep_params.hpp"
#include "ferry/device/sync.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/device/vec.cuh"

namespace ferry::ep {

// NOTE [EP epochs]
// Each EpBuffer counts completed dispatch_recv and combine_recv launches in a
// device-local Epochs record; a call works on epoch n = completed + 1 (the send
// half and the receive half of one call read the same n, since the receive half
// is the one that advances it, in its last block). So a CUDA graph replays with
// no host bookkeeping.
//  - Arrival: every send block, after its stores, adds 1 (release, system
//    scope) to the receiver's flag kDispatchArrived + source; the receiver waits
//    for n * num_send_blocks from every source (own rank included). The counts
//    a source writes are covered by the same release (block 0 writes them).
//  - Reuse: the staging region a source writes at epoch n is the one the
//    receiver read at epoch n - 1. The receiver's last block stores n into the
//    source's kDispatchConsumed + receiver after every block has read it; the
//    source waits for n - 1 there before its first store. Two dispatches in a
//    row (no combine between) are therefore safe.
//  - Combine is the same protocol with kCombineArrived / kCombineConsumed and
//    the combine staging region (indexed by the home rank's token, so the home
//    needs no search).
__device__ __forceinline__ uint64_t current_epoch(const uint64_t* completed) {
  return *reinterpret_cast<const volatile uint64_t*>(completed) + 1;
}

// Last block of the grid: advances the epoch and tells every source it may
// reuse what this rank just read (`consumed_slot` + this rank in its flags).
__device__ __forceinline__ void finish_receive(const Params& p, uint64_t* completed, unsigned* blocks_done,
                                               int consumed_slot, uint64_t epoch) {
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence_system();
    last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  if (threadIdx.x < p.world_size)
    device::st_release_sys(p.flags[threadIdx.x] + consumed_slot + p.rank, epoch);
  if (threadIdx.x == 0) {
    *blocks_done = 0;
    *completed = epoch;
    __threadfence();
  }
}

// Threads [0, world) wait until flag slot + peer of this rank reaches `target`.
// Returns false for the whole block when any wait failed (timeout or abort).
__device__ __forceinline__ bool wait_all_peers(const Params& p, int slot, uint64_t target, int32_t phase) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < p.world_size && target > 0) {
    if (!device::wait_flag_geq(p.flags[p.rank] + slot + peer, target, p.wait, peer, phase)) failed = 1;
  }
  __syncthreads();
  return failed == 0;
}

// Threads [0, world): one release add per destination after the block's stores.
__device__ __forceinline__ void signal_all_peers(const Params& p, int slot) {
  __syncthreads();
  if (threadIdx.x < p.world_size) {
    __threadfence_system();
    device::signal_add_release_sys(p.flags[threadIdx.x] + slot + p.rank, 1);
  }
}

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

// Eight bf16 values of one lane -> eight e4m3 bytes, given the group scale.
__device__ __forceinline__ uint2 quantize_fp8x8(const float (&f)[8], float inv_scale) {
  uint2 out;
  uint8_t* b = reinterpret_cast<uint8_t*>(&out);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const __nv_fp8_e4m3 q(f[i] * inv_scale);
    b[i] = *reinterpret_cast<const uint8_t*>(&q);
  }
  return out;
}

}  // namespace ferry::ep
