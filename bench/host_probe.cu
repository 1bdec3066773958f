// ferry-bench pcie: how fast each GPU moves bytes to and from pinned host memory, by method and SM count, every
// rank at once. It is the floor of the cross-node paths whose windows land in host memory (UCX shared memory or tcp,
// NOTE [Window staging]): there a send half's SMs store rows into host memory and the receive half's SMs load them.
//
// Methods (each rank moves `--bytes` in items of `--item-bytes`, items spread over the warps of `--sms` blocks, with
// the EP kernels' row copy, row_copy.cuh's warp_copy):
//   store         GPU memory -> this rank's pinned host buffer (a send half's stores)
//   load          pinned host buffer -> GPU memory (a receive half's loads)
//   load_l2_128, load_l2_256, load_nc_256
//                 loads with PTX's L2 prefetch-size hint (ld.global.L2::128B / ::256B; nc: the read-only path too):
//                 whether the L2 then fetches host memory in larger requests
//   load_tma      lane 0 of each warp: bulk copy host -> shared (2 KB, an mbarrier), then shared -> GPU memory
//   both          the first half of the blocks store, the rest load, at once (overlapped halves)
//   store+ce_h2d  store's kernel on all the SMs and ce_h2d on a second stream, at once: a send half of SMs beside
//                 a receive by copy engine
//   ce_d2h        cudaMemcpyAsync device to host (no SMs; one column)
//   ce_h2d        cudaMemcpyAsync host to device
//   ce_both       the two copies at once, on two streams
// GB/s: bytes moved / time (both, store+ce_h2d, ce_both: the bytes of both directions); median of CUDA-graph
// replays, max time over ranks. Every method's result is checked. The host buffer is allocated by the rank's own
// process (first touch: the NUMA node it ran on), as a landing buffer of UCX shared memory is by its receiver.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "host_pattern.cuh"
#include "row_copy.cuh"

namespace ferry::bench {
namespace {

enum class HostMethod {
  kStore,
  kLoad,
  kLoad128,
  kLoad256,
  kLoadNc256,
  kLoadTma,
  kBoth,
  kStoreCeH2d,
  kCeD2h,
  kCeH2d,
  kCeBoth
};

const char* host_method_name(HostMethod m) {
  switch (m) {
    case HostMethod::kStore: return "store";
    case HostMethod::kLoad: return "load";
    case HostMethod::kLoad128: return "load_l2_128";
    case HostMethod::kLoad256: return "load_l2_256";
    case HostMethod::kLoadNc256: return "load_nc_256";
    case HostMethod::kLoadTma: return "load_tma";
    case HostMethod::kBoth: return "both";
    case HostMethod::kStoreCeH2d: return "store+ce_h2d";
    case HostMethod::kCeD2h: return "ce_d2h";
    case HostMethod::kCeH2d: return "ce_h2d";
    case HostMethod::kCeBoth: return "ce_both";
  }
  return "?";
}

// What a method moves: GPU memory -> host memory, host memory -> GPU memory, or both at once (its GB/s then counts
// both directions' bytes, and its check looks at both destinations).
bool stores_to_host(HostMethod m) {
  return m == HostMethod::kStore || m == HostMethod::kBoth || m == HostMethod::kStoreCeH2d || m == HostMethod::kCeD2h ||
         m == HostMethod::kCeBoth;
}
bool loads_from_host(HostMethod m) { return m != HostMethod::kStore && m != HostMethod::kCeD2h; }
bool copy_engine_only(HostMethod m) {
  return m == HostMethod::kCeD2h || m == HostMethod::kCeH2d || m == HostMethod::kCeBoth;
}

struct HostParams {
  int items;
  int item_bytes;
  uint8_t* device_src;      // items the store methods send to host memory
  uint8_t* device_dst;      // where the load methods land
  uint8_t* host_dst;        // pinned: where the store methods land
  const uint8_t* host_src;  // pinned: what the load methods read
  int store_blocks;         // blocks [0, store_blocks) store, the rest load
};

// Blocks below store_blocks copy device_src -> host_dst, the others host_src ->
// device_dst; each role spreads all the items over its own warps.
__global__ void host_copy_kernel(HostParams p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const bool storing = int(blockIdx.x) < p.store_blocks;
  const int role_block = storing ? int(blockIdx.x) : int(blockIdx.x) - p.store_blocks;
  const int role_blocks = storing ? p.store_blocks : int(gridDim.x) - p.store_blocks;
  const uint8_t* src = storing ? p.device_src : p.host_src;
  uint8_t* dst = storing ? p.host_dst : p.device_dst;
  for (int i = role_block * warps + warp; i < p.items; i += role_blocks * warps) {
    uint8_t* row = dst + size_t(i) * p.item_bytes;
    warp_copy(src + size_t(i) * p.item_bytes, &row, 1, p.item_bytes, lane);
  }
}

template <HostMethod M>
__device__ __forceinline__ uint4 host_load16(const uint8_t* ptr) {
  uint4 v;
  if constexpr (M == HostMethod::kLoad128) {
    asm volatile("ld.global.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(ptr));
  } else if constexpr (M == HostMethod::kLoad256) {
    asm volatile("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(ptr));
  } else {
    asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(ptr));
  }
  return v;
}

// load_l2_*: warp_copy's loop with the hinted loads, host_src -> device_dst.
template <HostMethod M>
__global__ void host_load_hint_kernel(HostParams p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int units = p.item_bytes / 16;
  for (int i = blockIdx.x * warps + warp; i < p.items; i += gridDim.x * warps) {
    const uint8_t* src = p.host_src + size_t(i) * p.item_bytes;
    uint8_t* dst = p.device_dst + size_t(i) * p.item_bytes;
    for (int base = 0; base < units; base += 32 * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = base + u * 32 + lane;
        if (j < units) v[u] = host_load16<M>(src + size_t(j) * 16);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = base + u * 32 + lane;
        if (j < units) device::store16(dst + size_t(j) * 16, v[u]);
      }
    }
  }
}

constexpr int kHostTmaChunk = 2048;  // bytes per bulk copy; one shared buffer per warp

__device__ __forceinline__ uint32_t shared_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// load_tma: lane 0 of each warp bulk-copies each 2 KB of its item host ->
// shared (an mbarrier counts the bytes), then shared -> GPU memory, waiting for
// that store's read of the buffer.
__global__ void host_load_tma_kernel(HostParams p) {
  extern __shared__ __align__(128) uint8_t tma_smem[];
  __shared__ __align__(8) uint64_t barriers[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane != 0) return;
  const uint32_t buffer = shared_address(tma_smem + size_t(warp) * kHostTmaChunk);
  const uint32_t barrier = shared_address(&barriers[warp]);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barrier));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  uint32_t phase = 0;
  for (int i = blockIdx.x * warps + warp; i < p.items; i += gridDim.x * warps) {
    for (int done = 0; done < p.item_bytes; done += kHostTmaChunk) {
      const uint32_t bytes = static_cast<uint32_t>(min(kHostTmaChunk, p.item_bytes - done));
      const size_t at = size_t(i) * p.item_bytes + done;
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx:"
          ":bytes [%0], [%1], %2, [%3];" ::"r"(buffer),
          "l"(p.host_src + at), "r"(bytes), "r"(barrier)
          : "memory");
      uint32_t ready = 0;
      while (!ready) {
        asm volatile(
            "{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 "
            "q, [%1], %2; selp.u32 %0, 1, 0, q; }"
            : "=r"(ready)
            : "r"(barrier), "r"(phase)
            : "memory");
      }
      phase ^= 1;
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(p.device_dst + at), "r"(buffer),
                   "r"(bytes)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Pinned host memory, mapped into the GPU's address space (what a registered
// landing buffer is): from cudaHostAlloc, or (registered) shared pages from mmap registered with
// cudaHostRegister, as UCX shared memory's landing buffers are. Kernels and the host use one address (UVA).
class PinnedBuffer {
 public:
  PinnedBuffer(size_t bytes, bool registered) : bytes_(bytes), registered_(registered) {
    if (!registered_) {
      FERRY_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocMapped));
      return;
    }
    ptr_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ptr_ == MAP_FAILED) throw std::runtime_error("ferry-bench pcie: mmap of the host buffer failed");
    FERRY_CUDA_CHECK(cudaHostRegister(ptr_, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    void* device = nullptr;
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&device, ptr_, 0));
    if (device != ptr_) throw std::runtime_error("ferry-bench pcie: registered memory without one address (UVA)");
  }
  ~PinnedBuffer() {
    if (!registered_) {
      cudaFreeHost(ptr_);
      return;
    }
    cudaHostUnregister(ptr_);
    munmap(ptr_, bytes_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
};

}  // namespace

void print_pcie_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np N ferry-bench pcie [--sms 4,8,...] [--bytes 32M] [--item-bytes 14336]\n"
               "                                     [--threads 1024] [--registered-host] [--csv FILE]\n"
               "GB/s per GPU between GPU memory and pinned host memory, every rank at once, by method (store, load\n"
               "and its hinted / TMA forms, both: SM copies; store+ce_h2d; ce_d2h, ce_h2d, ce_both: copy engine) and\n"
               "SM count: the floor of cross-node windows that land in host memory. --registered-host: the host\n"
               "buffers are mmap'd shared pages registered with cudaHostRegister (as UCX shared memory's landings).\n");
}

int run_pcie_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const CopyProbeOptions o = parse_copy_probe_options(std::move(args));
  const bool leader = bootstrap->rank() == 0;
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));

  HostParams p{};
  p.item_bytes = o.item_bytes;
  p.items = int(o.bytes / o.item_bytes);
  const size_t bytes = size_t(p.items) * o.item_bytes;
  DeviceBuffer device_src(bytes), device_dst(bytes);
  PinnedBuffer host_src(bytes, o.registered_host), host_dst(bytes, o.registered_host);
  p.device_src = static_cast<uint8_t*>(device_src.get());
  p.device_dst = static_cast<uint8_t*>(device_dst.get());
  p.host_dst = host_dst.get();
  p.host_src = host_src.get();
  const size_t words = bytes / 4;
  const int salt_out = 2 * comm.rank() + 1, salt_in = 2 * comm.rank() + 2;
  host_fill_kernel<<<132, 1024>>>(reinterpret_cast<uint32_t*>(p.device_src), words, salt_out);
  host_fill_kernel<<<132, 1024>>>(reinterpret_cast<uint32_t*>(host_src.get()), words, salt_in);
  FERRY_CUDA_CHECK(cudaGetLastError());
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  CudaStream stream, side;
  cudaEvent_t fork, join;
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  DeviceBuffer mismatches(sizeof(unsigned long long));
  const size_t tma_smem = size_t(o.threads / 32) * kHostTmaChunk;
  FERRY_CUDA_CHECK(
      cudaFuncSetAttribute(host_load_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tma_smem)));

  // `work` on the side stream, joined back into s: what runs beside the main stream's part of a method.
  auto beside = [&](cudaStream_t s, auto work) {
    FERRY_CUDA_CHECK(cudaEventRecord(fork, s));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(side.get(), fork, 0));
    work(side.get());
    FERRY_CUDA_CHECK(cudaEventRecord(join, side.get()));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
  };
  auto enqueue = [&](HostMethod m, int blocks, cudaStream_t s) {
    switch (m) {
      case HostMethod::kStore:
      case HostMethod::kLoad:
      case HostMethod::kBoth: {
        HostParams q = p;
        q.store_blocks = m == HostMethod::kStore ? blocks : m == HostMethod::kLoad ? 0 : blocks / 2;
        host_copy_kernel<<<blocks, o.threads, 0, s>>>(q);
        break;
      }
      case HostMethod::kLoad128: host_load_hint_kernel<HostMethod::kLoad128><<<blocks, o.threads, 0, s>>>(p); break;
      case HostMethod::kLoad256: host_load_hint_kernel<HostMethod::kLoad256><<<blocks, o.threads, 0, s>>>(p); break;
      case HostMethod::kLoadNc256: host_load_hint_kernel<HostMethod::kLoadNc256><<<blocks, o.threads, 0, s>>>(p); break;
      case HostMethod::kLoadTma: host_load_tma_kernel<<<blocks, o.threads, tma_smem, s>>>(p); break;
      case HostMethod::kCeD2h:
        FERRY_CUDA_CHECK(cudaMemcpyAsync(p.host_dst, p.device_src, bytes, cudaMemcpyDeviceToHost, s));
        break;
      case HostMethod::kCeH2d:
        FERRY_CUDA_CHECK(cudaMemcpyAsync(p.device_dst, p.host_src, bytes, cudaMemcpyHostToDevice, s));
        break;
      case HostMethod::kStoreCeH2d: {
        beside(s, [&](cudaStream_t other) {
          FERRY_CUDA_CHECK(cudaMemcpyAsync(p.device_dst, p.host_src, bytes, cudaMemcpyHostToDevice, other));
        });
        HostParams q = p;
        q.store_blocks = blocks;
        host_copy_kernel<<<blocks, o.threads, 0, s>>>(q);
        break;
      }
      case HostMethod::kCeBoth:
        beside(s, [&](cudaStream_t other) {
          FERRY_CUDA_CHECK(cudaMemcpyAsync(p.host_dst, p.device_src, bytes, cudaMemcpyDeviceToHost, other));
        });
        FERRY_CUDA_CHECK(cudaMemcpyAsync(p.device_dst, p.host_src, bytes, cudaMemcpyHostToDevice, s));
        break;
    }
    FERRY_CUDA_CHECK(cudaGetLastError());
  };
  // Correct first: poisoned destinations, one run, the landed words compared.
  auto check = [&](HostMethod m, int blocks) {
    std::fill_n(p.host_dst, bytes, uint8_t(0xEE));
    FERRY_CUDA_CHECK(cudaMemset(p.device_dst, 0xEE, bytes));
    FERRY_CUDA_CHECK(cudaMemset(mismatches.get(), 0, sizeof(unsigned long long)));
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    enqueue(m, blocks, stream.get());
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    unsigned long long* counter = static_cast<unsigned long long*>(mismatches.get());
    if (stores_to_host(m))
      host_check_kernel<<<132, 1024, 0, stream.get()>>>(reinterpret_cast<const uint32_t*>(p.host_dst), words, salt_out,
                                                        counter);
    if (loads_from_host(m))
      host_check_kernel<<<132, 1024, 0, stream.get()>>>(reinterpret_cast<const uint32_t*>(p.device_dst), words, salt_in,
                                                        counter);
    FERRY_CUDA_CHECK(cudaGetLastError());
    return no_mismatches_on_any_rank(*bootstrap, mismatches, stream.get());
  };

  if (leader) {
    std::printf("ferry-bench pcie: %d ranks at once, %s each way in %d-byte items, %d threads per block, host memory "
                "%s\n", comm.size(), format_byte_size(bytes).c_str(), o.item_bytes, o.threads,
                o.registered_host ? "registered (mmap + cudaHostRegister)" : "cudaHostAlloc");
    std::printf("  GB/s per GPU (bytes moved / time; both directions' bytes where a method moves both), median of "
                "graph replays, max time over ranks; '!' failed check\n");
  }
  CopyProbeTable table(leader, o);
  TimingOptions timing;
  timing.ops_per_graph = 4;
  for (HostMethod m : {HostMethod::kStore, HostMethod::kLoad, HostMethod::kLoad128, HostMethod::kLoad256,
                       HostMethod::kLoadNc256, HostMethod::kLoadTma, HostMethod::kBoth, HostMethod::kStoreCeH2d,
                       HostMethod::kCeD2h, HostMethod::kCeH2d, HostMethod::kCeBoth}) {
    table.begin_row(host_method_name(m));
    const std::vector<int> counts = copy_engine_only(m) ? std::vector<int>{0} : o.sms;
    for (int sms : counts) {
      const int blocks =
          copy_engine_only(m) ? 0 : std::max(m == HostMethod::kBoth ? 2 : 1, std::min(sms, comm.num_sms()));
      const bool ok = check(m, blocks);
      const TimingResult t = time_op({host_method_name(m), [&](cudaStream_t s) { enqueue(m, blocks, s); }, {}},
                                     stream.get(), *bootstrap, timing);
      const double moved = double(bytes) * (int(stores_to_host(m)) + int(loads_from_host(m)));
      table.cell(host_method_name(m), blocks, t.op_us, moved / 1e9 / (t.op_us * 1e-6), ok);
    }
    table.end_row();
  }
  FERRY_CUDA_CHECK(cudaEventDestroy(fork));
  FERRY_CUDA_CHECK(cudaEventDestroy(join));
  return 0;
}

}  // namespace ferry::bench
