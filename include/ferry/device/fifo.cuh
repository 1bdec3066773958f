// The proxy FIFO: GPU threads (or host threads) push descriptors of network
// operations into a ring in host-mapped memory; one proxy thread per GPU drains
// it into the transport (src/net/proxy.cpp).
//
// NOTE [Proxy FIFO protocol]
// - A producer takes a ticket t with an atomic add on `head` (device memory for
//   GPU producers, host memory for host producers: each FIFO has one kind).
// - Entry t lives in slot t % capacity. Before writing it, the producer waits
//   (timeout primitive) until the consumer has retired ticket t - capacity, i.e.
//   `*tail > t - capacity`: a full FIFO makes producers wait, it never drops or
//   overwrites an entry.
// - The producer writes the entry's fields, then release-stores seq = t + 1
//   (system scope): the proxy reads the fields only after it sees seq == t + 1.
// - The proxy handles tickets strictly in order, sets the slot's seq back to 0,
//   then stores tail = t + 1, which frees the slot for ticket t + capacity.
// - Quiet: a kQuiet entry with ticket t asks the proxy to complete (flush, at
//   the target) every operation of the tickets before it, then to store
//   `*flushed = t + 1`; the producer waits for that.
// Entries of one producer thread are handled in the order it pushed them, and a
// signal is issued behind a fence after every earlier entry of the FIFO, so a
// signal is never visible at its target before the data pushed before it.
#pragma once

#include <cstdint>

#include "ferry/device/timeout.cuh"

namespace ferry {

enum class FifoOp : uint32_t {
  kNone = 0,
  kPut = 1,            // bytes from window offset src_offset to the peer's window at dst_offset
  kPutWithSignal = 2,  // kPut, then signal_add once the data is in place
  kSignal = 3,         // add signal_value to signal word signal_index of this rank at the peer
  kQuiet = 4,          // complete everything before this entry, then publish `flushed`
};

// One descriptor: 64 bytes, one cache line. `seq` is written last.
struct alignas(64) FifoEntry {
  uint64_t seq;           // ticket + 1 once the entry is complete; 0 when the slot is free
  uint32_t op;            // FifoOp
  uint32_t window;        // window id (the proxy's registry)
  int32_t peer;           // destination rank (global)
  uint32_t signal_index;  // signal word at the destination
  uint64_t dst_offset;    // bytes into the destination's window
  uint64_t src_offset;    // bytes into this rank's window
  uint64_t bytes;
  uint64_t signal_value;  // added to the signal word (kPutWithSignal, kSignal)
  uint64_t reserved;
};
static_assert(sizeof(FifoEntry) == 64, "a FifoEntry is one cache line");

#ifdef __CUDACC__
#define FERRY_FIFO_HD __host__ __device__ __forceinline__
#else
#define FERRY_FIFO_HD inline
#endif

// One descriptor, as a kernel or a host producer pushes it (seq is set by the push).
FERRY_FIFO_HD FifoEntry make_fifo_entry(FifoOp op, uint32_t window, int32_t peer, uint64_t dst_offset,
                                        uint64_t src_offset, uint64_t bytes, uint32_t signal_index,
                                        uint64_t signal_value) {
  FifoEntry e{};
  e.op = static_cast<uint32_t>(op);
  e.window = window;
  e.peer = peer;
  e.dst_offset = dst_offset;
  e.src_offset = src_offset;
  e.bytes = bytes;
  e.signal_index = signal_index;
  e.signal_value = signal_value;
  return e;
}
#undef FERRY_FIFO_HD

// What a producer needs; travels by value inside a DeviceWindow.
struct FifoHandle {
  FifoEntry* entries;        // host-mapped ring (as seen by the producer)
  uint64_t* head;            // ticket counter (device memory, or host memory for a host FIFO)
  const uint64_t* tail;      // host-mapped: tickets retired by the proxy
  const uint64_t* flushed;   // host-mapped: quiet tickets completed (t + 1)
  uint64_t* tail_cache;      // device memory: the last tail a GPU producer read (nullptr: host FIFO)
  uint64_t capacity;         // entries in the ring
};

#ifdef __CUDACC__
namespace device {

__device__ __forceinline__ uint64_t ld_volatile_u64(const uint64_t* ptr) {
  return *reinterpret_cast<const volatile uint64_t*>(ptr);
}

// One thread pushes one entry (NOTE [Proxy FIFO protocol]); the caller has made
// the data an entry refers to visible first (__threadfence_system after the
// stores). Returns the ticket, or ~0 when the wait for a free slot failed.
__device__ __forceinline__ uint64_t fifo_push(const FifoHandle& fifo, FifoEntry entry, const WaitContext& ctx) {
  const uint64_t ticket = atomicAdd(reinterpret_cast<unsigned long long*>(fifo.head), 1ull);
  // Reading the host's tail crosses PCIe: first ask the device-side copy the
  // producers keep (it only lags, so it never admits a ticket too early).
  if (ticket >= fifo.capacity && ld_volatile_u64(fifo.tail_cache) + fifo.capacity <= ticket) {
    const bool ok = spin_wait(
        [&](uint64_t& seen) {
          seen = ld_volatile_u64(fifo.tail);
          return seen + fifo.capacity > ticket;
        },
        ctx, entry.peer, kPhaseProxyFifoFull, ticket - fifo.capacity + 1);
    if (!ok) return ~0ull;
    atomicMax(reinterpret_cast<unsigned long long*>(fifo.tail_cache), static_cast<unsigned long long>(ld_volatile_u64(fifo.tail)));
  }
  FifoEntry* slot = fifo.entries + ticket % fifo.capacity;
  uint64_t* words = reinterpret_cast<uint64_t*>(slot);
  const uint64_t* src = reinterpret_cast<const uint64_t*>(&entry);
#pragma unroll
  for (int i = 1; i < 8; ++i) reinterpret_cast<volatile uint64_t*>(words)[i] = src[i];
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(words), "l"(ticket + 1) : "memory");
  return ticket;
}

// Pushes a kQuiet entry and waits until the proxy has completed every entry
// before it at its target. One thread.
__device__ __forceinline__ bool fifo_quiet(const FifoHandle& fifo, int32_t any_peer, const WaitContext& ctx) {
  const uint64_t ticket = fifo_push(fifo, make_fifo_entry(FifoOp::kQuiet, 0, any_peer, 0, 0, 0, 0, 0), ctx);
  if (ticket == ~0ull) return false;
  return spin_wait(
      [&](uint64_t& seen) {
        seen = ld_acquire_sys(fifo.flushed);
        return seen > ticket;
      },
      ctx, -1, kPhaseProxyQuiet, ticket + 1);
}

}  // namespace device
#endif  // __CUDACC__

}  // namespace ferry
