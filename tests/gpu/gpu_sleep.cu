#include "gpu/gpu_sleep.hpp"

#include <stdexcept>
#include <string>

namespace ferry::testing {
namespace {

__global__ void sleep_kernel(unsigned long long nanoseconds) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(10000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

}  // namespace

void gpu_sleep(cudaStream_t stream, int microseconds) {
  sleep_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds) * 1000ull);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("gpu_sleep: ") + cudaGetErrorString(e));
}

}  // namespace ferry::testing
