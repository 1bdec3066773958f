// The one timeout primitive every device spin-wait goes through.
//
// NOTE [Device timeouts]
// A kernel that waits for a peer (a flag, a signal) never spins forever: every
// wait polls a deadline read from %globaltimer. On expiry the first waiter to
// notice records {rank, peer, phase} in a DeviceErrorState that lives in
// host-mapped pinned memory, and every waiter returns false so the kernel can
// exit early (its output is then undefined). A device-memory abort flag, set
// by the first waiter that times out, makes every other waiter give up at once,
// so one timeout drains the whole grid quickly; it stays set, as the
// communicator is aborted from then on. The host reads the record (Communicator::check), throws a TimeoutError
// naming rank, peer and phase, and the communicator refuses further work: the
// flags of the aborted exchange are out of step, so no later call could be safe.
#pragma once

#include <cstdint>

namespace ferry {

struct DeviceErrorState {
  volatile int32_t code;   // 0 = fine, 1 = timeout
  volatile int32_t rank;   // rank that timed out
  volatile int32_t peer;   // peer it was waiting for (-1: unknown / any)
  volatile int32_t phase;  // what it was doing (see phase_name)
  volatile uint64_t expected;
  volatile uint64_t observed;
};

enum DeviceErrorCode : int32_t { kDeviceOk = 0, kDeviceTimeout = 1, kDeviceTransportError = 2 };

// Phases, for messages. Algorithms use these ids when they wait.
enum WaitPhase : int32_t {
  kPhaseUnknown = 0,
  kPhaseOneShotExchange = 1,
  kPhaseTwoShotReduceScatter = 2,
  kPhaseTwoShotAllGather = 3,
  kPhaseRingReduceScatter = 4,
  kPhaseRingAllGather = 5,
  kPhaseRecursiveDoubling = 6,
  kPhaseBarrier = 7,
  kPhaseEpDispatch = 8,
  kPhaseEpCombine = 9,
  kPhaseSignalWait = 10,     // device API: wait_signal
  kPhaseProxyFifoFull = 11,  // a producer waiting for a free FIFO slot
  kPhaseProxyQuiet = 12,     // quiet: waiting for the proxy to complete earlier puts
  kPhaseProxyTransfer = 13,  // the proxy's transport failed (peer gone)
  kPhaseHierarchicalReduceScatter = 14,  // hierarchical allreduce: the node's inputs (NVLink)
  kPhaseHierarchicalInterNode = 15,      // hierarchical allreduce: the other nodes' partials (proxy)
  kPhaseHierarchicalAllGather = 16,      // hierarchical allreduce: the node's reduced shards (NVLink)
};

inline const char* phase_name(int32_t phase) {
  switch (phase) {
    case kPhaseOneShotExchange: return "allreduce one-shot exchange";
    case kPhaseTwoShotReduceScatter: return "allreduce two-shot reduce-scatter";
    case kPhaseTwoShotAllGather: return "allreduce two-shot all-gather";
    case kPhaseRingReduceScatter: return "allreduce ring reduce-scatter";
    case kPhaseRingAllGather: return "allreduce ring all-gather";
    case kPhaseRecursiveDoubling: return "allreduce recursive doubling";
    case kPhaseBarrier: return "device barrier";
    case kPhaseEpDispatch: return "ep dispatch";
    case kPhaseEpCombine: return "ep combine";
    case kPhaseSignalWait: return "wait_signal";
    case kPhaseProxyFifoFull: return "proxy fifo full";
    case kPhaseProxyQuiet: return "proxy quiet";
    case kPhaseProxyTransfer: return "proxy transfer";
    case kPhaseHierarchicalReduceScatter: return "allreduce hierarchical reduce-scatter in the node";
    case kPhaseHierarchicalInterNode: return "allreduce hierarchical exchange across nodes";
    case kPhaseHierarchicalAllGather: return "allreduce hierarchical all-gather in the node";
    default: return "unknown phase";
  }
}

// What a kernel needs to wait with a deadline. Travels inside each kernel's Params.
struct WaitContext {
  DeviceErrorState* error;  // host-mapped: written once, on timeout
  int32_t* abort_flag;      // device memory: polled by waiters (a host-mapped read
                            // in the spin loop would cross PCIe and stall it)
  uint64_t timeout_ns;
  int32_t rank;
};

#ifdef __CUDACC__
namespace device {

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* ptr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(ptr) : "memory");
  return v;
}
// A strong load with no ordering: for words that carry their own tag (each 8-byte store is single-copy atomic).
__device__ __forceinline__ uint64_t ld_relaxed_sys(const uint64_t* ptr) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(ptr) : "memory");
  return v;
}

// Records the first timeout of the communicator (slow path, out of line).
__device__ __noinline__ inline void report_timeout(WaitContext ctx, int32_t peer, int32_t phase,
                                                   uint64_t expected, uint64_t observed) {
  if (atomicCAS(ctx.abort_flag, kDeviceOk, kDeviceTimeout) == kDeviceOk) {
    ctx.error->rank = ctx.rank;
    ctx.error->peer = peer;
    ctx.error->phase = phase;
    ctx.error->expected = expected;
    ctx.error->observed = observed;
    __threadfence_system();  // the record before the code the host polls
    ctx.error->code = kDeviceTimeout;
    __threadfence_system();
  }
}

// THE timeout primitive: spins until ready(observed) returns true. Returns false
// once the deadline passes (after recording it) or once any waiter of this
// communicator has recorded a timeout. `expected`/`observed` only feed the
// error message.
template <typename Ready>
__device__ __forceinline__ bool spin_wait(Ready&& ready, WaitContext ctx, int32_t peer, int32_t phase,
                                          uint64_t expected) {
  uint64_t observed = 0;
  if (ready(observed)) return true;
  const uint64_t start = global_timer_ns();
  uint32_t spins = 0;
  while (!ready(observed)) {
    if ((++spins & 255u) != 0) continue;
    if (*static_cast<volatile int32_t*>(ctx.abort_flag) != kDeviceOk) return false;
    if (global_timer_ns() - start > ctx.timeout_ns) {
      report_timeout(ctx, peer, phase, expected, observed);
      return false;
    }
  }
  return true;
}

// Spins until *flag >= expected (flags are monotonic epochs, see the algorithms'
// NOTEs). Acquire loads in the spin: measured ~1 us faster per exchange on
// 4xH200 than relaxed loads followed by one fence.acq_rel.sys.
__device__ __noinline__ inline bool wait_flag_geq(const uint64_t* flag, uint64_t expected,
                                                  WaitContext ctx, int32_t peer, int32_t phase) {
  return spin_wait(
      [&](uint64_t& seen) {
        seen = ld_acquire_sys(flag);
        return seen >= expected;
      },
      ctx, peer, phase, expected);
}

}  // namespace device
#endif  // __CUDACC__

}  // namespace ferry
