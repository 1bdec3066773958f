// The NVLink channel: what a kernel needs to load, store and signal straight into
// the memory of the peers of its node (CUDA IPC mappings of a symmetric buffer).
// AllReduce and EP kernels take these instead of raw pointer arrays; the device
// API in channel.cuh uses them for peers in the node and the proxy FIFO for the
// others.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/device/timeout.cuh"
#ifdef __CUDACC__
// Device only: sync.cuh's helpers call wait_flag_geq, which timeout.cuh declares
// only for nvcc; host code (peer_ptrs.hpp) needs just the tables.
#include "ferry/device/sync.cuh"
#endif

#ifdef __CUDACC__
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD inline
#endif

namespace ferry::device {

// Ranks one NVLink node holds (an 8-GPU node): the size of every peer table.
constexpr int kMaxNodeRanks = 8;

// One symmetric buffer (or a typed region of it) as mapped in this process, by
// the rank's index in the kernel's group (its local rank for node-local
// kernels). ptr[self] is this rank's own memory; unused entries are nullptr.
template <typename T>
struct PeerPtrs {
  T* ptr[kMaxNodeRanks];
  FERRY_HD T* operator[](int peer) const { return ptr[peer]; }
};

// NOTE [Flag rows]
// A flag region is an array of uint64 words in every rank's memory, mapped into
// every peer. Flags only grow (epochs, counters), so waits are `flag >= value`
// and no flag is ever reset. Collective exchanges use rows: a row is
// kMaxNodeRanks consecutive words where word `source` is written only by rank
// `source`. A writer publishes data by: its data stores -> __syncthreads() ->
// block_signal_row (release stores at system scope); a reader: block_wait_row
// (acquire spins, then __syncthreads()) -> loads of the data.
struct PeerFlags {
  PeerPtrs<uint64_t> region;  // every rank's flag region
  int32_t rank;               // this rank's index in the group
  int32_t world_size;

#ifdef __CUDACC__
  // Release-stores `value` into word `slot` of peer's region.
  __device__ __forceinline__ void signal(int peer, size_t slot, uint64_t value) const {
    st_release_sys(region[peer] + slot, value);
  }
  // Release-adds `value` to word `slot` of peer's region.
  __device__ __forceinline__ void signal_add(int peer, size_t slot, uint64_t value) const {
    signal_add_release_sys(region[peer] + slot, value);
  }
  // Spins (timeout primitive) until word `slot` of this rank's region reaches
  // `expected`; `peer` and `phase` only name the wait in a timeout report.
  __device__ __forceinline__ bool wait(size_t slot, uint64_t expected, const WaitContext& ctx, int peer,
                                       int32_t phase) const {
    return wait_flag_geq(region[rank] + slot, expected, ctx, peer, phase);
  }
  // Word `slot` of this rank's region, as a pointer (for warp-level waits).
  __device__ __forceinline__ uint64_t* local(size_t slot) const { return region[rank] + slot; }

  // Block scope: thread t < world_size release-stores `value` into word
  // row + rank of rank t (itself only with include_self). The caller orders the
  // block's data stores first (__syncthreads()).
  __device__ __forceinline__ void block_signal_row(size_t row, uint64_t value, bool include_self) const {
    const int peer = static_cast<int>(threadIdx.x);
    if (peer < world_size && (include_self || peer != rank)) signal(peer, row + rank, value);
  }
  // Block scope: thread t < world_size waits until word row + t of this rank
  // reaches `expected` (its own only with include_self), then __syncthreads().
  // A failed wait sets *failed_shared (block shared memory, zeroed by the
  // caller); returns false for the whole block once it is set, then and after.
  __device__ __forceinline__ bool block_wait_row(size_t row, uint64_t expected, const WaitContext& ctx,
                                                 int32_t phase, bool include_self, int* failed_shared) const {
    const int peer = static_cast<int>(threadIdx.x);
    if (peer < world_size && (include_self || peer != rank)) {
      if (!wait(row + peer, expected, ctx, peer, phase)) *failed_shared = 1;
    }
    __syncthreads();
    return *static_cast<volatile int*>(failed_shared) == 0;
  }
  // Block scope: thread 0 waits for one word (from one peer), then __syncthreads().
  __device__ __forceinline__ bool block_wait_one(size_t slot, uint64_t expected, const WaitContext& ctx, int peer,
                                                 int32_t phase, int* failed_shared) const {
    if (threadIdx.x == 0 && !wait(slot, expected, ctx, peer, phase)) *failed_shared = 1;
    __syncthreads();
    return *static_cast<volatile int*>(failed_shared) == 0;
  }
#endif  // __CUDACC__
};

}  // namespace ferry::device

#undef FERRY_HD
