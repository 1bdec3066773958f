// A kernel that keeps a stream busy for a while (one thread, spinning on the GPU's clock): it holds back one
// rank's later work so that a protocol's waits, not the host's timing, decide what another rank sees.
#pragma once

#include <cuda_runtime.h>

namespace ferry::testing {

// Enqueues a 1-thread kernel on `stream` that returns after `microseconds` of GPU time.
void gpu_sleep(cudaStream_t stream, int microseconds);

}  // namespace ferry::testing
