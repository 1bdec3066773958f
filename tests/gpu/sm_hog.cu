#include "gpu/sm_hog.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

namespace ferry::testing {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("SmHog: ") + what + ": " + cudaGetErrorString(e));
}

// Spins until told to stop, or after `limit_ns` (a failed test must not wedge the
// GPU). The stop word is device memory and polled every 20 us: polling mapped host
// memory from every hog block would load PCIe and slow everything else down.
__global__ void hog_kernel(const volatile int* stop, int* resident, unsigned long long limit_ns) {
  extern __shared__ char held[];  // the SM's whole shared memory: nothing else fits beside this block
  if (threadIdx.x != 0) return;
  held[0] = 0;
  atomicAdd_system(resident, 1);
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*stop == 0) {
    __nanosleep(20000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > limit_ns) break;
  }
}

}  // namespace

std::string SmHog::unusable_reason(int ranks_sharing_device) {
  int device = 0, mps = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) mps = 0;
  cudaGetLastError();
  if (mps != 0 && ranks_sharing_device > 1)
    return "ranks share this GPU under MPS: their hogs would fight over the free SMs (the device script "
           "restricts SMs there with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE instead)";
  return "";
}

SmHog::SmHog(int free_sms) : free_sms_(free_sms) {
  int device = 0, sms = 0, optin = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "shared memory");
  blocks_ = sms - free_sms;
  if (blocks_ < 1) throw std::runtime_error("SmHog: " + std::to_string(free_sms) + " free SMs leave nothing to hold");
  check(cudaFuncSetAttribute(hog_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin), "opt in");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hog_kernel, 32, optin), "occupancy");
  if (per_sm != 1) throw std::runtime_error("SmHog: a hog block does not take a whole SM");
  check(cudaHostAlloc(&resident_, sizeof(int), cudaHostAllocMapped), "resident count");
  *resident_ = 0;
  int* device_resident = nullptr;
  check(cudaHostGetDevicePointer(&device_resident, resident_, 0), "resident pointer");
  check(cudaMalloc(&stop_, sizeof(int)), "stop word");
  check(cudaMemset(stop_, 0, sizeof(int)), "stop word");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&control_, cudaStreamNonBlocking), "control stream");
  hog_kernel<<<blocks_, 32, optin, stream_>>>(stop_, device_resident, 120ull * 1000 * 1000 * 1000);
  check(cudaGetLastError(), "launch");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (__atomic_load_n(resident_, __ATOMIC_ACQUIRE) < blocks_) {
    if (std::chrono::steady_clock::now() > deadline) {
      const int resident = *resident_;
      this->~SmHog();
      throw std::runtime_error("SmHog: only " + std::to_string(resident) + " of " + std::to_string(blocks_) +
                               " hog blocks became resident");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

SmHog::~SmHog() {
  if (stop_ != nullptr && control_ != nullptr) {
    static const int kStop = 1;
    cudaMemcpyAsync(stop_, &kStop, sizeof(int), cudaMemcpyHostToDevice, control_);  // copy engine: no SM needed
    cudaStreamSynchronize(control_);
  }
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (control_ != nullptr) cudaStreamDestroy(control_);
  if (stop_ != nullptr) cudaFree(stop_);
  if (resident_ != nullptr) cudaFreeHost(resident_);
  stream_ = control_ = nullptr;
  stop_ = resident_ = nullptr;
}

}  // namespace ferry::testing
