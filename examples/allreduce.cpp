// ferry AllReduce, end to end:   mpirun -np N ferry-example-allreduce
//
// One process per GPU. Each rank fills a buffer with rank-dependent values, sums it
// across ranks with every algorithm this communicator supports (bf16 and fp32),
// checks the result on the host against the exact expected sum, then times a few
// sizes. Exits non-zero if any rank saw a wrong value.
#include <cuda_runtime.h>
#include <mpi.h>  // only for MPI_Abort on errors

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ferry/allreduce.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace {

constexpr size_t kMaxBytes = size_t{64} << 20;  // largest buffer any call reduces

// bf16 <-> float on the host (round to nearest even; the values used here are exact).
uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Rank r's value at index i. Small integers, so every partial sum is exact in bf16
// (sums stay below 256 for up to 85 ranks) and in fp32: any summation order gives
// the same, exactly known, result.
float value(ferry::DataType type, size_t i, int rank) {
  if (type == ferry::DataType::kBFloat16) return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3) % 4);
  return static_cast<float>((i * 13 + static_cast<size_t>(rank) * 101) % 1000) * 0.5f;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { FERRY_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Sums `count` elements of `type` across ranks with `algorithm` and compares every
// element with the expected sum. Returns the number of wrong elements on this rank.
size_t check_sum(ferry::Communicator& comm, ferry::AllReduce& ar, ferry::AllReduceAlgorithm algorithm,
                 ferry::DataType type, size_t count, void* in, void* out, cudaStream_t stream) {
  const size_t esize = ferry::dtype_size(type);
  std::vector<uint8_t> host(count * esize);
  for (size_t i = 0; i < count; ++i) {
    float v = value(type, i, comm.rank());
    if (type == ferry::DataType::kBFloat16) {
      uint16_t h = to_bf16(v);
      std::memcpy(host.data() + i * esize, &h, esize);
    } else {
      std::memcpy(host.data() + i * esize, &v, esize);
    }
  }
  FERRY_CUDA_CHECK(cudaMemcpyAsync(in, host.data(), host.size(), cudaMemcpyHostToDevice, stream));
  FERRY_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, host.size(), stream));  // poison: NaN in both types

  ar.run(in, out, count, type, ferry::ReduceOp::kSum, stream, algorithm);

  FERRY_CUDA_CHECK(cudaMemcpyAsync(host.data(), out, host.size(), cudaMemcpyDeviceToHost, stream));
  comm.synchronize(stream);  // also throws if a device wait timed out

  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0.0f;
    for (int r = 0; r < comm.size(); ++r) expected += value(type, i, r);
    float got;
    if (type == ferry::DataType::kBFloat16) {
      uint16_t h;
      std::memcpy(&h, host.data() + i * esize, esize);
      got = from_bf16(h);
    } else {
      std::memcpy(&got, host.data() + i * esize, esize);
    }
    if (!(got == expected)) {
      if (wrong < 3) {
        std::fprintf(stderr, "[rank %d] %s %s count %zu: out[%zu] = %g, expected %g\n", comm.rank(),
                     ferry::algorithm_name(algorithm), ferry::dtype_name(type), count, i, got, expected);
      }
      ++wrong;
    }
  }
  return wrong;
}

int run_example(const std::shared_ptr<ferry::MpiBootstrap>& bootstrap) {
  const int rank = bootstrap->rank();

  int gpus = 0;
  const cudaError_t status = cudaGetDeviceCount(&gpus);
  if (status != cudaSuccess || gpus == 0) {
    if (rank == 0)
      std::fprintf(stderr, "ferry-example-allreduce: it needs one GPU per rank, and %s\n",
                   ferry::no_gpu_reason(status, status == cudaSuccess ? gpus : 0).c_str());
    return 2;
  }

  ferry::Communicator comm(bootstrap);
  ferry::AllReduce ar(comm, kMaxBytes);
  if (rank == 0) {
    std::printf("ferry allreduce example: %d ranks, %d per node, %d GPUs visible per process\n", comm.size(),
                comm.local_size(), gpus);
  }

  cudaStream_t stream;
  FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer in(kMaxBytes), out(kMaxBytes);
  FERRY_CUDA_CHECK(cudaMemsetAsync(in.ptr, 0, kMaxBytes, stream));

  // ---- correctness: every supported algorithm, bf16 and fp32, a small odd count and a large one
  const ferry::AllReduceAlgorithm algorithms[] = {
      ferry::AllReduceAlgorithm::kAuto, ferry::AllReduceAlgorithm::kOneShot, ferry::AllReduceAlgorithm::kTwoShot,
      ferry::AllReduceAlgorithm::kRing, ferry::AllReduceAlgorithm::kRecursiveDoubling,
      ferry::AllReduceAlgorithm::kHierarchical};
  const ferry::DataType types[] = {ferry::DataType::kBFloat16, ferry::DataType::kFloat32};
  const size_t counts[] = {1003, size_t{4} << 20};

  size_t total_wrong = 0;
  if (rank == 0) std::printf("\n%-20s %-9s %10s  %s\n", "algorithm", "dtype", "count", "result");
  for (auto algorithm : algorithms) {
    if (!ar.supports(algorithm)) {
      if (rank == 0) std::printf("%-20s %-9s %10s  not supported here\n", ferry::algorithm_name(algorithm), "-", "-");
      continue;
    }
    for (auto type : types) {
      for (size_t count : counts) {
        size_t wrong = check_sum(comm, ar, algorithm, type, count, in.ptr, out.ptr, stream);
        auto all = bootstrap->all_gather_value(static_cast<uint64_t>(wrong));
        uint64_t sum = 0;
        for (auto w : all) sum += w;
        total_wrong += sum;
        if (rank == 0) {
          std::printf("%-20s %-9s %10zu  %s", ferry::algorithm_name(algorithm), ferry::dtype_name(type), count,
                      sum == 0 ? "OK" : "MISMATCH");
          if (sum != 0) std::printf(" (%llu wrong elements over all ranks)", static_cast<unsigned long long>(sum));
          std::printf("\n");
        }
      }
    }
  }

  // ---- timing: bf16 sum with the automatic choice, a few sizes (mean per call, slowest rank)
  if (rank == 0) {
    std::printf("\n%-10s %-20s %10s %12s\n", "bytes", "algorithm (auto)", "time_us", "busbw_GB/s");
  }
  cudaEvent_t start, stop;
  FERRY_CUDA_CHECK(cudaEventCreate(&start));
  FERRY_CUDA_CHECK(cudaEventCreate(&stop));
  const size_t sizes[] = {size_t{8} << 10, size_t{256} << 10, size_t{1} << 20, size_t{16} << 20, kMaxBytes};
  const int warmup = 5, iters = 20;
  for (size_t bytes : sizes) {
    const size_t count = bytes / 2;
    for (int i = 0; i < warmup; ++i) {
      ar.run(in.ptr, out.ptr, count, ferry::DataType::kBFloat16, ferry::ReduceOp::kSum, stream);
    }
    comm.synchronize(stream);
    bootstrap->barrier();
    FERRY_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) {
      ar.run(in.ptr, out.ptr, count, ferry::DataType::kBFloat16, ferry::ReduceOp::kSum, stream);
    }
    FERRY_CUDA_CHECK(cudaEventRecord(stop, stream));
    comm.synchronize(stream);
    float ms = 0.0f;
    FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    auto all = bootstrap->all_gather_value(ms / iters * 1000.0f);
    const float us = *std::max_element(all.begin(), all.end());
    const int n = comm.size();
    const double busbw = static_cast<double>(bytes) / (us * 1e-6) * 2.0 * (n - 1) / n / 1e9;
    if (rank == 0) {
      std::printf("%-10zu %-20s %10.1f %12.1f\n", bytes, ferry::algorithm_name(ar.select(bytes)), us, busbw);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);

  if (rank == 0) {
    std::printf("\n%s\n", total_wrong == 0 ? "ferry allreduce example: PASSED" : "ferry allreduce example: FAILED");
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int main() {
  // The bootstrap outlives everything else: MPI stays up until the end, also on errors.
  std::shared_ptr<ferry::MpiBootstrap> bootstrap;
  try {
    bootstrap = std::make_shared<ferry::MpiBootstrap>();
    return run_example(bootstrap);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-example-allreduce: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-example-allreduce: unexpected error: %s\n", e.what());
  }
  // The other ranks may be waiting in a collective for this one: end the whole job.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
