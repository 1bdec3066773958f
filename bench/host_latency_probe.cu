// ferry-bench pcie-latency: what one thread of a GPU waits for host memory while other SMs of the same GPU stream
// stores into host memory (as a cross-node send over UCX shared memory does). Session 49 (docs/internode.md): a
// receive grid beside the send grid saw the headers' signal, stored at the send's start, only at its end; the
// claim is that a system fence (each signal follows one) and a load of host memory wait behind the GPU's queued
// host writes. This measures it.
//
// One kernel per writer SM count: blocks 1.. (the writers) store `--bytes` into a pinned host buffer, 16 bytes a
// lane, then record when they finished; block 0's thread 0 (the prober) alternates, kSamples times: a chain of
// dependent volatile loads of host words (a load's round trip: the chain's time / (kChain - 1)), and a store to a
// host word followed by __threadfence_system() (the fence's wait). Each sample is timed with clock64 and stamped
// with %globaltimer, so only samples taken while the writers were still storing count ("during"); with 0 writers
// every sample is idle.
// Per SM count: the median and 90th percentile of both, and the writers' GB/s. One rank at a time (ranks of one
// host would share the link: run it with -np 1).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench {
namespace {

constexpr int kSamples = 2048;  // per kind
constexpr int kChain = 5;       // dependent host loads a load sample times

struct LatencyUnderWrites {
  uint4* host_data;             // the writers' target (pinned host memory)
  size_t units;                 // 16-byte units to write in all
  volatile uint32_t* host_word;  // the prober's load target (another page of pinned host memory)
  volatile uint32_t* host_flag;  // the prober's store target before each fence
  long long* load_cycles;        // [kSamples]
  long long* fence_cycles;       // [kSamples]
  unsigned long long* stamps;    // [kSamples]: %globaltimer at each sample pair's start
  unsigned long long* writers_done;  // the last writer's %globaltimer at its end (atomicMax)
  unsigned long long* start;     // the prober's %globaltimer at its start
  uint32_t* sink;
};

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(1024, 1) latency_under_writes_kernel(LatencyUnderWrites p) {
  if (blockIdx.x > 0) {
    const size_t writers = size_t(gridDim.x - 1) * blockDim.x;
    const uint4 v = make_uint4(blockIdx.x, threadIdx.x, 0x5A5A5A5Au, 0xA5A5A5A5u);
    for (size_t i = size_t(blockIdx.x - 1) * blockDim.x + threadIdx.x; i < p.units; i += writers) p.host_data[i] = v;
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(p.writers_done, globaltimer());
    return;
  }
  if (threadIdx.x != 0) return;
  *p.start = globaltimer();
  uint32_t acc = 0;
  for (int s = 0; s < kSamples; ++s) {
    p.stamps[s] = globaltimer();
    // kChain loads, each one's address from the one before (the words hold 0): the clock read after the chain
    // is not ordered after the last load's return, but every earlier load's round trip is in the chain's time.
    uint32_t v = 0;
    long long t0 = clock64();
#pragma unroll 1
    for (int k = 0; k < kChain; ++k) v = p.host_word[v & 1u];
    long long t1 = clock64();
    acc += v;
    p.load_cycles[s] = (t1 - t0) / (kChain - 1);
    *p.host_flag = uint32_t(s);
    t0 = clock64();
    __threadfence_system();
    t1 = clock64();
    p.fence_cycles[s] = t1 - t0;
  }
  *p.sink = acc;
}


// The sample at rank q of the sorted samples (0 for none). Not bench_timing's median: that one throws on no
// samples (a run whose writers finish before the first sample has none) and averages the middle two.
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

void print_pcie_latency_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np 1 ferry-bench pcie-latency [--sms 1,8,32,131] [--bytes 256M]\n"
               "One thread's host-memory load round trip and system fence, in microseconds (median and 90th\n"
               "percentile of the samples taken while the writers stored), while --sms other SMs of the same GPU\n"
               "store --bytes into pinned host memory; the first row (0) is idle.\n");
}

int run_pcie_latency_probe(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  CopyProbeOptions o = parse_copy_probe_options(std::move(args));
  if (o.registered_host || !o.csv_path.empty())
    throw UsageError("takes --sms and --bytes only");
  start_gpu_subcommand(*bootstrap);
  Communicator comm(bootstrap);
  require_one_node(comm, 1, 1);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  int clock_khz = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, comm.device()));
  const size_t units = o.bytes / 16;
  void* host = nullptr;
  FERRY_CUDA_CHECK(cudaHostAlloc(&host, units * 16 + 8192, cudaHostAllocMapped));
  auto free_host = std::unique_ptr<void, void (*)(void*)>(host, [](void* h) { cudaFreeHost(h); });
  uint8_t* words = static_cast<uint8_t*>(host) + units * 16;  // two pages past the writers' bytes
  std::memset(words, 0, 8192);  // the load chain's words hold 0
  DeviceBuffer loads(sizeof(long long) * kSamples), fences(sizeof(long long) * kSamples),
      stamps(sizeof(unsigned long long) * kSamples), marks(2 * sizeof(unsigned long long)), sink(sizeof(uint32_t));
  std::printf("ferry-bench pcie-latency: one thread's host load and system fence while other SMs store %s into "
              "pinned host memory (us; median / p90 of %d samples each, only those taken while storing)\n",
              format_byte_size(units * 16).c_str(), kSamples);
  std::printf("%-12s %10s %10s %10s %10s %8s %10s\n", "writer SMs", "load p50", "load p90", "fence p50", "fence p90",
              "samples", "write GB/s");
  const double us_per_cycle = 1e3 / double(clock_khz);
  std::vector<int> writer_sms = {0};  // idle first
  writer_sms.insert(writer_sms.end(), o.sms.begin(), o.sms.end());
  LatencyUnderWrites p{};
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p.host_data), host, 0));
  uint8_t* device_words = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_words), words, 0));
  p.host_word = reinterpret_cast<volatile uint32_t*>(device_words);
  p.host_flag = reinterpret_cast<volatile uint32_t*>(device_words + 4096);
  p.load_cycles = static_cast<long long*>(loads.get());
  p.fence_cycles = static_cast<long long*>(fences.get());
  p.stamps = static_cast<unsigned long long*>(stamps.get());
  p.writers_done = static_cast<unsigned long long*>(marks.get());
  p.start = p.writers_done + 1;
  p.sink = static_cast<uint32_t*>(sink.get());
  for (int sms : writer_sms) {
    const int writers = std::max(0, std::min(sms, comm.num_sms() - 1));
    FERRY_CUDA_CHECK(cudaMemset(marks.get(), 0, marks.bytes()));
    p.units = writers > 0 ? units : 0;
    latency_under_writes_kernel<<<1 + writers, 1024>>>(p);
    FERRY_CUDA_CHECK(cudaGetLastError());
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    const auto load_cycles = download<long long>(loads.get(), kSamples);
    const auto fence_cycles = download<long long>(fences.get(), kSamples);
    const auto at = download<unsigned long long>(stamps.get(), kSamples);
    const auto mark = download<unsigned long long>(marks.get(), 2);
    std::vector<double> load_us, fence_us;
    for (int s = 0; s < kSamples; ++s) {
      if (writers > 0 && at[s] >= mark[0]) continue;  // the writers were done
      load_us.push_back(double(load_cycles[s]) * us_per_cycle);
      fence_us.push_back(double(fence_cycles[s]) * us_per_cycle);
    }
    const double write_us = writers > 0 && mark[0] > mark[1] ? double(mark[0] - mark[1]) / 1e3 : 0.0;
    std::printf("%-12d %10.2f %10.2f %10.2f %10.2f %8zu %10.1f\n", writers, percentile(load_us, 0.5),
                percentile(load_us, 0.9), percentile(fence_us, 0.5), percentile(fence_us, 0.9), load_us.size(),
                write_us > 0 ? double(units * 16) / 1e3 / write_us : 0.0);
  }
  return 0;
}

}  // namespace ferry::bench
