// NOTE [EP trace]
// Diagnostics, off by default: where a kernel's time goes, phase by phase, on the
// GPU itself (Nsight Systems is not on the device machine, and Nsight Compute
// serializes launches, so it cannot time waits on a peer). Built with
// -DFERRY_EP_TRACE (cmake -DCMAKE_CUDA_FLAGS=-DFERRY_EP_TRACE), thread 0 of each
// block stamps %globaltimer at the kernel's phase points; the last block of the
// launch to finish prints, for launch epochs = 50 mod 100, per point, the earliest
// and latest block's stamp in microseconds after the earliest block started, a
// line per point, e.g.
//   [ferry ep trace] rank 0 dispatch_send epoch 150 blocks 44 start 512345: p1 2.1-2.1 us
// A point some blocks do not reach (block 0's layout) shows only those that did:
// stamps older than this launch's first start are left out. Without the flag every
// macro expands to nothing, so the kernels' code is unchanged.
#pragma once

#ifdef FERRY_EP_TRACE
#include <cstdio>

#include "ferry/device/timeout.cuh"

namespace ferry::ep::trace {

constexpr int kPoints = 16;
constexpr int kBlocks = 160;

constexpr int kSpans = 16;

struct Stamps {
  unsigned long long t[kPoints][kBlocks];
  unsigned long long span[kSpans][2];  // per launch (epoch mod kSpans): first block's start, last block's end
  unsigned int arrived;
};

__device__ inline void stamp(Stamps& s, int point) {
  if (threadIdx.x == 0 && blockIdx.x < kBlocks) s.t[point][blockIdx.x] = device::global_timer_ns();
}

// Every block, after its last point; the last one prints (see the NOTE).
__device__ inline void report(Stamps& s, const char* label, int rank, unsigned long long epoch, int points) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(&s.arrived, 1u) != gridDim.x - 1) return;
  __threadfence();
  s.arrived = 0;
  const int blocks = min(int(gridDim.x), kBlocks);
  unsigned long long start = ~0ull;
  for (int b = 0; b < blocks; ++b) start = min(start, s.t[0][b]);
  s.span[epoch % kSpans][0] = start;
  s.span[epoch % kSpans][1] = device::global_timer_ns();
  if (epoch % 100 != 50) return;
  // The spans of the launches before this one (none of them printed), as %globaltimer's microseconds mod
  // 10^6: with the other kernels' lines, where the time between the kernels goes.
  for (int e = 1; e < kSpans && e <= int(epoch); ++e) {
    const unsigned long long* sp = s.span[(epoch - e) % kSpans];
    printf("[ferry ep trace] rank %d %s epoch %llu span %llu.%03llu-%llu.%03llu\n", rank, label, epoch - e,
           (sp[0] / 1000) % 1000000, sp[0] % 1000, (sp[1] / 1000) % 1000000, sp[1] % 1000);
  }
  for (int i = 0; i < points; ++i) {
    unsigned long long lo = ~0ull, hi = 0;
    for (int b = 0; b < blocks; ++b) {
      const unsigned long long v = s.t[i][b];
      if (v < start) continue;  // not reached in this launch
      lo = min(lo, v);
      hi = max(hi, v);
    }
    if (hi == 0) continue;
    const unsigned long long a = (lo - start) / 100, z = (hi - start) / 100;  // tenths of a microsecond
    // The start as %globaltimer's microseconds mod 10^6: lines of the halves and of successive calls align.
    printf("[ferry ep trace] rank %d %s epoch %llu blocks %d start %llu: p%d %llu.%llu-%llu.%llu us\n", rank, label,
           epoch, int(gridDim.x), (start / 1000) % 1000000, i, a / 10, a % 10, z / 10, z % 10);
  }
}


// NOTE [EP trace] phase sums: where the warps' time goes inside an item loop. Lane 0 of each warp adds the
// nanoseconds since its previous mark to the phase it marks (global atomics: a diagnostic, it perturbs a little);
// the launch's last block reads and clears the sums and prints them, for launch epochs = 50 mod 100, as
// microseconds per warp of the grid and the number of marks, e.g.
//   [ferry ep trace] rank 0 combine_one_role epoch 150 warps 736: phase 1 312.4 us per warp, 8168 marks
constexpr int kPhases = 8;

struct PhaseSums {
  unsigned long long ns[kPhases];
  unsigned long long marks[kPhases];
};

__device__ inline void phase_start(unsigned long long& clock) {
  if ((threadIdx.x & 31) == 0) clock = device::global_timer_ns();
}

__device__ inline void phase_mark(PhaseSums& s, int phase, unsigned long long& clock) {
  if ((threadIdx.x & 31) != 0) return;
  const unsigned long long now = device::global_timer_ns();
  atomicAdd(&s.ns[phase], now - clock);
  atomicAdd(&s.marks[phase], 1ull);
  clock = now;
}

// Thread 0 of the launch's last block, once every warp made its last mark.
__device__ inline void phase_report(PhaseSums& s, const char* label, int rank, unsigned long long epoch, int phases) {
  if (threadIdx.x != 0) return;
  __threadfence();
  const unsigned long long warps = (unsigned long long)gridDim.x * (blockDim.x / 32);
  for (int i = 0; i < phases && i < kPhases; ++i) {
    const unsigned long long ns = atomicExch(&s.ns[i], 0ull), marks = atomicExch(&s.marks[i], 0ull);
    if (epoch % 100 != 50 || marks == 0) continue;
    const unsigned long long tenths = ns / warps / 100;  // tenths of a microsecond per warp
    printf("[ferry ep trace] rank %d %s epoch %llu warps %llu: phase %d %llu.%llu us per warp, %llu marks\n", rank,
           label, epoch, warps, i, tenths / 10, tenths % 10, marks);
  }
}

}  // namespace ferry::ep::trace

#define FERRY_EP_TRACE_DEFINE(name) __device__ ::ferry::ep::trace::Stamps name;
#define FERRY_EP_TRACE_POINT(name, point) ::ferry::ep::trace::stamp(name, point)
#define FERRY_EP_TRACE_REPORT(name, label, p, epoch, points) \
  ::ferry::ep::trace::report(name, label, (p).rank, (epoch), points)
#define FERRY_EP_PHASE_DEFINE(name) __device__ ::ferry::ep::trace::PhaseSums name;
#define FERRY_EP_PHASE_CLOCK(clock) \
  unsigned long long clock = 0;     \
  ::ferry::ep::trace::phase_start(clock)
#define FERRY_EP_PHASE_MARK(name, phase, clock) ::ferry::ep::trace::phase_mark(name, phase, clock)
#define FERRY_EP_PHASE_REPORT(name, label, p, epoch, phases) \
  ::ferry::ep::trace::phase_report(name, label, (p).rank, (epoch), phases)
#else
#define FERRY_EP_TRACE_DEFINE(name)
#define FERRY_EP_TRACE_POINT(name, point) \
  do {                                    \
  } while (0)
#define FERRY_EP_TRACE_REPORT(name, label, p, epoch, points) \
  do {                                                      \
  } while (0)
#define FERRY_EP_PHASE_DEFINE(name)
#define FERRY_EP_PHASE_CLOCK(clock) [[maybe_unused]] unsigned long long clock = 0
#define FERRY_EP_PHASE_MARK(name, phase, clock) \
  do {                                          \
  } while (0)
#define FERRY_EP_PHASE_REPORT(name, label, p, epoch, phases) \
  do {                                                      \
  } while (0)
#endif
