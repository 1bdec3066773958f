// System-scope release/acquire flags and signals between GPUs.
//
// A writer publishes data to a peer by: stores of the data (any threads of the
// block) -> __syncthreads() -> one thread's release store (or release add) of the
// flag. A reader: one thread's acquire load (wait_flag_geq) -> __syncthreads() ->
// loads of the data. Release/acquire are at system scope because the peer is
// another GPU.
#pragma once

#include <cstdint>

#include "ferry/device/timeout.cuh"

namespace ferry::device {

__device__ __forceinline__ void st_release_sys(uint64_t* ptr, uint64_t value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}
// GPU scope: for a flag read only by threads of this GPU (an acquire at system scope pairs with it there).
__device__ __forceinline__ void st_release_gpu(uint64_t* ptr, uint64_t value) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* ptr, uint64_t value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}
// Two 8-byte words in one 16-byte store, each a relaxed system-scope store (for words that carry their own tag and
// are read by ld_relaxed_sys; ptr 16-byte aligned).
__device__ __forceinline__ void st_relaxed_sys_v2(uint64_t* ptr, uint64_t first, uint64_t second) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(ptr), "l"(first), "l"(second) : "memory");
}
__device__ __forceinline__ void signal_add_release_sys(uint64_t* ptr, uint64_t value) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
// Adds 1 to a counter of the blocks of one grid (GPU scope), returning the old
// value: the release covers the caller's block (after a barrier), the acquire
// lets the block that counts last read what the others did before counting.
__device__ __forceinline__ unsigned count_block_acq_rel(unsigned* counter) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
}

// Barrier `id` (1..15; 0 is __syncthreads) of `threads` threads of the block
// (a multiple of 32): lets two groups of one block run apart.
__device__ __forceinline__ void named_barrier(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Waits until the signal reaches `expected` (signals only grow).
__device__ __forceinline__ bool signal_wait_geq(const uint64_t* signal, uint64_t expected,
                                                WaitContext ctx, int32_t peer,
                                                int32_t phase) {
  return wait_flag_geq(signal, expected, ctx, peer, phase);
}

// Programmatic dependent launch (compute capability 9.0+; elsewhere both return
// at once). allow_dependent_launch: a grid launched after this one with
// cudaLaunchAttributeProgrammaticStreamSerialization may start once every block
// of this grid ran it. wait_prior_grid: waits until the grid before this one on
// the stream is complete and its memory visible (the kernel boundary's
// guarantee); a grid started early must call it before touching memory that
// earlier work writes.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace ferry::device
