// ferry-bench nvlink's kernels (bench/nvlink_probe.cu runs them): the copy
// methods it times and the fill/check kernels that make every method's result
// checked. The methods are described at the top of nvlink_probe.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ferry/device/sync.cuh"
#include "ferry/device/vec.cuh"
#include "row_copy.cuh"

namespace ferry::bench::nvlink_probe {

constexpr int kMaxPeers = 8;
constexpr int kTmaChunk = 2048;  // bytes per warp and buffer (two buffers per warp)
constexpr int kFlagWords = 4096;

enum class Method {
  kStore, kStoreRelease, kPull, kTma, kCopyEngine, kStoreLocal, kStoreSplit, kLocalX4, kLocalX4Tma, kLocalSum4
};
constexpr int kLocalFanout = 4;  // local rows per item in local_x4
inline const char* method_name(Method m) {
  switch (m) {
    case Method::kStore: return "store";
    case Method::kStoreRelease: return "store_release";
    case Method::kPull: return "pull";
    case Method::kTma: return "tma";
    case Method::kCopyEngine: return "copy_engine";
    case Method::kStoreLocal: return "store_local";
    case Method::kStoreSplit: return "store_split";
    case Method::kLocalX4: return "local_x4";
    case Method::kLocalX4Tma: return "local_x4_tma";
    case Method::kLocalSum4: return "local_sum4";
  }
  return "?";
}

struct Params {
  int rank;
  int world_size;
  size_t per_peer_bytes;
  int item_bytes;
  int items_per_peer;
  uint8_t* src[kMaxPeers];  // every rank's source buffer: slice d goes to rank d
  uint8_t* dst[kMaxPeers];  // every rank's destination buffer: slice s came from rank s
  uint64_t* flags[kMaxPeers];
  uint8_t* local;  // this rank's local rows: [kLocalFanout][W][per_peer_bytes]
};

// Row f of item (peer, offset) in the local buffer.
__device__ __forceinline__ uint8_t* local_row(const Params& p, int f, int peer, size_t offset) {
  return p.local + (size_t(f) * p.world_size + peer) * p.per_peer_bytes + offset;
}

// Item i of this rank: (peer, byte offset inside the peer's slice).
__device__ __forceinline__ void item_target(const Params& p, int i, int& peer, size_t& offset) {
  const int peers = p.world_size - 1;
  peer = (p.rank + 1 + i % peers) % p.world_size;
  offset = size_t(i / peers) * p.item_bytes;
}

// 8 bf16 of each of the kLocalFanout rows at unit i, weighted (1, 1/2, 1/4, ...),
// summed in fp32 and rounded to bf16: what the expanded combine does per unit.
__device__ __forceinline__ uint4 weighted_sum_unit(const Params& p, int peer, size_t offset, size_t i) {
  float acc[8] = {};
  for (int f = 0; f < kLocalFanout; ++f) {
    const uint4 v = device::load16(local_row(p, f, peer, offset) + i * 16);
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&v);
    const float w = 1.f / float(1 << f);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = fmaf(w, __bfloat162float(h[j]), acc[j]);
  }
  uint4 out;
  __nv_bfloat16* o = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j] = __float2bfloat16(acc[j]);
  return out;
}

// Row (peer, offset) of the local sums (this rank's dst buffer, unused by peers in local_sum4).
__device__ __forceinline__ uint8_t* sum_row(const Params& p, int peer, size_t offset) {
  return p.dst[p.rank] + size_t(peer) * p.per_peer_bytes + offset;
}

// local_sum4: the warp sums its item's kLocalFanout rows, 4 units per lane in flight per row.
__global__ void sum_kernel(Params p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int items = (p.world_size - 1) * p.items_per_peer;
  const int units = p.item_bytes / 16;
  for (int i = blockIdx.x * warps + warp; i < items; i += gridDim.x * warps) {
    int peer;
    size_t offset;
    item_target(p, i, peer, offset);
    for (int base = 0; base < units; base += 32 * 4) {
      uint4 out[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int unit = base + u * 32 + lane;
        if (unit < units) out[u] = weighted_sum_unit(p, peer, offset, size_t(unit));
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int unit = base + u * 32 + lane;
        if (unit < units) device::store16(sum_row(p, peer, offset) + size_t(unit) * 16, out[u]);
      }
    }
  }
}

template <Method M>
__global__ void copy_kernel(Params p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int items = (p.world_size - 1) * p.items_per_peer;
  // store_split: blocks [0, peer_blocks) store to peers, the others write the local copies.
  const int peer_blocks = max(1, int(gridDim.x) * 2 / 3);
  const bool local_role = M == Method::kStoreSplit && int(blockIdx.x) >= peer_blocks && gridDim.x > 1;
  int block = blockIdx.x, blocks = gridDim.x;
  if (M == Method::kStoreSplit && gridDim.x > 1) {
    block = local_role ? block - peer_blocks : block;
    blocks = local_role ? blocks - peer_blocks : peer_blocks;
  }
  for (int i = block * warps + warp; i < items; i += blocks * warps) {
    int peer;
    size_t offset;
    item_target(p, i, peer, offset);
    const uint8_t* mine = p.src[p.rank] + size_t(peer) * p.per_peer_bytes + offset;
    if constexpr (M == Method::kPull) {
      uint8_t* dst[1] = {p.dst[p.rank] + size_t(peer) * p.per_peer_bytes + offset};
      warp_copy(p.src[peer] + size_t(p.rank) * p.per_peer_bytes + offset, dst, 1, p.item_bytes, lane);
    } else if constexpr (M == Method::kLocalX4) {
      uint8_t* dst[kLocalFanout];
      for (int f = 0; f < kLocalFanout; ++f) dst[f] = local_row(p, f, peer, offset);
      warp_copy(mine, dst, kLocalFanout, p.item_bytes, lane);
    } else if constexpr (M == Method::kStoreSplit) {
      uint8_t* dst[1] = {local_role ? local_row(p, 0, peer, offset)
                                    : p.dst[peer] + size_t(p.rank) * p.per_peer_bytes + offset};
      warp_copy(mine, dst, 1, p.item_bytes, lane);
      if (gridDim.x == 1) {
        dst[0] = local_row(p, 0, peer, offset);
        warp_copy(mine, dst, 1, p.item_bytes, lane);
      }
    } else {
      uint8_t* dst[2] = {p.dst[peer] + size_t(p.rank) * p.per_peer_bytes + offset, local_row(p, 0, peer, offset)};
      warp_copy(mine, dst, M == Method::kStoreLocal ? 2 : 1, p.item_bytes, lane);
      if constexpr (M == Method::kStoreRelease) {
        __syncwarp();
        if (lane == 0) device::st_release_sys(p.flags[peer] + (blockIdx.x * warps + warp) % kFlagWords, i + 1);
      }
    }
  }
}

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Lane 0 of each warp drives the bulk-copy engine: local global -> shared (an
// mbarrier counts the bytes), then shared -> peer global (a bulk group), two
// shared buffers so the next load overlaps the previous store. kLocalRows > 0:
// shared -> that many local rows instead of the peer.
template <int kLocalRows>
__global__ void tma_kernel(Params p) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t barriers[32][2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane != 0) return;
  uint8_t* buffers = smem + size_t(warp) * 2 * kTmaChunk;
  for (int b = 0; b < 2; ++b)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&barriers[warp][b])));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  uint32_t phase[2] = {0, 0};
  int use = 0;
  const int items = (p.world_size - 1) * p.items_per_peer;
  for (int i = blockIdx.x * warps + warp; i < items; i += gridDim.x * warps) {
    int peer;
    size_t offset;
    item_target(p, i, peer, offset);
    const uint8_t* src = p.src[p.rank] + size_t(peer) * p.per_peer_bytes + offset;
    uint8_t* dst = p.dst[peer] + size_t(p.rank) * p.per_peer_bytes + offset;
    for (int done = 0; done < p.item_bytes; done += kTmaChunk, ++use) {
      const int b = use & 1;
      const uint32_t bytes = static_cast<uint32_t>(min(kTmaChunk, p.item_bytes - done));
      const uint32_t buffer = smem_address(buffers + b * kTmaChunk);
      const uint32_t barrier = smem_address(&barriers[warp][b]);
      // The store that last read this buffer must be done reading it.
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       buffer),
                   "l"(src + done), "r"(bytes), "r"(barrier)
                   : "memory");
      uint32_t ready = 0;
      while (!ready) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(ready)
            : "r"(barrier), "r"(phase[b])
            : "memory");
      }
      phase[b] ^= 1;
      if constexpr (kLocalRows == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + done), "r"(buffer),
                     "r"(bytes)
                     : "memory");
      } else {
        for (int f = 0; f < kLocalRows; ++f)
          asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                           local_row(p, f, peer, offset) + done),
                       "r"(buffer), "r"(bytes)
                       : "memory");
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Word w of the slice rank `from` sends rank `to`.
__device__ __forceinline__ uint32_t pattern(int from, int to, size_t w) {
  return (uint32_t(from) * 131u + uint32_t(to) * 7919u) ^ (uint32_t(w) * 2654435761u);
}

// The local rows local_sum4 reads: row f of (peer, word) holds a pattern of its own.
__global__ void fill_local_kernel(Params p) {
  const size_t words = p.per_peer_bytes / 4;
  uint32_t* local = reinterpret_cast<uint32_t*>(p.local);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words * p.world_size * kLocalFanout;
       i += size_t(gridDim.x) * blockDim.x)
    local[i] = pattern(p.rank, int(i / words), i % words) ^ uint32_t(i / (words * p.world_size)) * 0x9e3779b9u;
}

// Every unit of every item's sum row against the same sum computed here.
__global__ void check_sums_kernel(Params p, unsigned long long* mismatches) {
  const size_t units = size_t(p.items_per_peer) * p.item_bytes / 16;
  unsigned long long bad = 0;
  for (int s = 0; s < p.world_size; ++s) {
    if (s == p.rank) continue;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < units; i += size_t(gridDim.x) * blockDim.x) {
      const uint4 want = weighted_sum_unit(p, s, 0, i);
      const uint4 got = device::load16(sum_row(p, s, 0) + i * 16);
      bad += want.x != got.x || want.y != got.y || want.z != got.z || want.w != got.w;
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

__global__ void fill_kernel(Params p) {
  const size_t words = p.per_peer_bytes / 4;
  uint32_t* src = reinterpret_cast<uint32_t*>(p.src[p.rank]);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words * p.world_size;
       i += size_t(gridDim.x) * blockDim.x)
    src[i] = pattern(p.rank, int(i / words), i % words);
}

// local_rows: 0 checks what peers sent here; n > 0 checks the first n local rows
// of this rank's own items instead.
__global__ void check_kernel(Params p, int local_rows, unsigned long long* mismatches) {
  const size_t words = size_t(p.items_per_peer) * p.item_bytes / 4;
  const size_t slice_words = p.per_peer_bytes / 4;
  unsigned long long bad = 0;
  for (int s = 0; s < p.world_size; ++s) {
    if (s == p.rank) continue;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
      if (local_rows == 0) {
        bad += reinterpret_cast<const uint32_t*>(p.dst[p.rank])[s * slice_words + i] != pattern(s, p.rank, i);
      } else {
        for (int f = 0; f < local_rows; ++f)
          bad += reinterpret_cast<const uint32_t*>(local_row(p, f, s, 0))[i] != pattern(p.rank, s, i);
      }
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

}  // namespace ferry::bench::nvlink_probe
