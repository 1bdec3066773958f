// GPU-initiated put with signal, end to end:
//
//   mpirun -np 2 ferry-example-gpu-put                          # two GPUs, or
//   FERRY_TEST_SHARE_GPUS=1 FERRY_RANKS_PER_NODE=1 mpirun -np 2 ferry-example-gpu-put
//                                                               # one GPU, two "nodes": through UCX
//
// What an RDMA example does, from a kernel:
//   endpoints            ferry::Communicator (bootstrap; UCX endpoints to ranks of other nodes)
//   registered memory    ferry::Window (symmetric: every rank registers the same size)
//   post write           ferry::device::put_with_signal (NVLink store, or a descriptor to the proxy)
//   doorbell             the descriptor's sequence word the proxy thread polls
//   poll completion      ferry::device::wait_signal on the receiver, ferry::device::quiet on the sender
// Rank 0 writes a buffer into rank 1's window and signals; rank 1's kernel
// waits for the signal and checks every byte. Exits non-zero if a byte differs.
#include <cuda_runtime.h>
#include <mpi.h>  // MPI_Abort only

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/error.hpp"
#include "ferry/window.hpp"

namespace {

constexpr size_t kBytes = size_t{4} << 20;  // 4 MiB
constexpr uint32_t kReady = 0;              // signal word: "the buffer is in your window"

__device__ uint8_t expected_byte(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 7); }

// Rank 0: fill the source half of its window, put it into rank 1's receive half, signal, quiet.
__global__ void sender(ferry::DeviceWindow w, int receiver) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kBytes; i += gridDim.x * blockDim.x)
    w.local[i] = static_cast<char>(expected_byte(i));
  // One block posts the write (its threads copy over NVLink, or its first thread
  // hands a descriptor to the proxy): make the other blocks' stores visible first.
  __threadfence();
  __syncthreads();
  if (blockIdx.x != 0) return;
  ferry::device::put_with_signal(w, receiver, /*dst_offset=*/kBytes, /*src_offset=*/0, kBytes, kReady, 1);
  if (threadIdx.x == 0) ferry::device::quiet(w);  // complete at the target before the kernel ends
}

// Rank 1: wait for the signal, then check every byte.
__global__ void receiver(ferry::DeviceWindow w, int sender_rank, unsigned long long* wrong) {
  __shared__ int ok;
  if (threadIdx.x == 0) ok = ferry::device::wait_signal(w, sender_rank, kReady, 1);
  __syncthreads();
  if (!ok) return;  // timed out: the host's synchronize() throws and says why
  const char* data = ferry::device::recv_ptr(w, sender_rank) + kBytes;
  unsigned long long bad = 0;
  for (size_t i = threadIdx.x; i < kBytes; i += blockDim.x)
    bad += static_cast<uint8_t>(data[i]) != expected_byte(i);
  atomicAdd(wrong, bad);
}

}  // namespace

int main() {
  try {
    // Kernels that run while a peer's kernel waits on the proxy are loaded up
    // front: CUDA's lazy loading could otherwise stall the proxy at their first
    // launch (docs/internode.md, "Lazy module loading").
    cudaFuncAttributes attributes;
    FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, sender));
    FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, receiver));
    auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
    ferry::Communicator comm(bootstrap);
    if (comm.size() < 2) {
      std::printf("gpu_put: run with at least 2 ranks (mpirun -np 2)\n");
      return 1;
    }
    ferry::Window window(comm, 2 * kBytes);  // [source half][receive half]
    const bool remote = !comm.topology().same_node(1);
    if (comm.rank() == 0)
      std::printf("gpu_put: %d ranks in %d node(s); rank 0 -> rank 1 over %s\n", comm.size(),
                  comm.topology().num_nodes, remote ? "the proxy (UCX)" : "NVLink");
    unsigned long long* wrong = nullptr;
    FERRY_CUDA_CHECK(cudaMalloc(&wrong, sizeof(*wrong)));
    FERRY_CUDA_CHECK(cudaMemset(wrong, 0, sizeof(*wrong)));
    cudaEvent_t start, stop;
    FERRY_CUDA_CHECK(cudaEventCreate(&start));
    FERRY_CUDA_CHECK(cudaEventCreate(&stop));
    bootstrap->barrier();
    FERRY_CUDA_CHECK(cudaEventRecord(start));
    if (comm.rank() == 0) sender<<<8, 256>>>(window.device(), 1);
    if (comm.rank() == 1) receiver<<<1, 1024>>>(window.device(), 0, wrong);
    FERRY_CUDA_CHECK(cudaEventRecord(stop));
    comm.synchronize(nullptr);  // throws TimeoutError if the signal never came
    float ms = 0;
    FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    unsigned long long host_wrong = 0;
    FERRY_CUDA_CHECK(cudaMemcpy(&host_wrong, wrong, sizeof(host_wrong), cudaMemcpyDeviceToHost));
    if (comm.rank() == 1)
      std::printf("gpu_put: rank 1 received %zu bytes from rank 0 in %.3f ms: %s\n", kBytes, ms,
                  host_wrong == 0 ? "every byte correct" : "WRONG BYTES");
    const auto all_wrong = bootstrap->all_gather_value(host_wrong);
    cudaFree(wrong);
    for (unsigned long long w : all_wrong)
      if (w != 0) return 1;
    return 0;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "gpu_put: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
