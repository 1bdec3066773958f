// Shared harness of the AllReduce GPU tests (test_allreduce*.cpp).
//
// AllReduce on real GPUs (mpirun -np 2/4/8, one GPU per rank), against a host
// reference: every rank generates its input from (seed, rank), so every rank can
// compute the full reference. Every checked call: poisons the output and guards
// around it, uploads the input, runs, reads back, and checks every element, the
// untouched guards, the unchanged input (out of place) and that every rank holds
// bitwise identical results.
// Across nodes (FERRY_RANKS_PER_NODE=k makes virtual nodes; with
// FERRY_TEST_SHARE_GPUS=1 several ranks share a GPU) the same tests run the
// hierarchical algorithm (and auto, which picks it); the NVLink-only algorithms
// must refuse with NotSupported and leave the communicator usable.
//
// One Communicator, AllReduce, stream, pair of buffers and seed sequence serve
// every AllReduce test of the program: shared() (defined once, in
// allreduce_harness.cpp) creates them on first use, and the global test
// environment registered there frees them before MPI finalizes.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/allreduce_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/types.hpp"

namespace ferry::testing::ar_gpu {

// The library's names the harness and the tests use (test files: using namespace ar_gpu).
using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::ReduceOp;

inline constexpr size_t kMaxBytes = size_t{32} << 20;
inline constexpr size_t kGuard = 256;  // poisoned bytes checked on both sides of an output
inline const std::vector<AllReduceAlgorithm> kAlgos = {AllReduceAlgorithm::kAuto,         AllReduceAlgorithm::kOneShot,
                                                       AllReduceAlgorithm::kTwoShot,      AllReduceAlgorithm::kRing,
                                                       AllReduceAlgorithm::kRecursiveDoubling,
                                                       AllReduceAlgorithm::kHierarchical};
// The algorithms that need every rank in one node.
inline const std::vector<AllReduceAlgorithm> kNvlinkOnly = {AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
                                                            AllReduceAlgorithm::kRing,
                                                            AllReduceAlgorithm::kRecursiveDoubling};
inline const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,
                                             DataType::kInt64,   DataType::kBFloat16, DataType::kFloat16};
inline const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                           ReduceOp::kAvg};

// Own names (valid gtest identifiers), independent of the library's.
const char* algo_id(AllReduceAlgorithm a);
const char* type_id(DataType t);
const char* op_id(ReduceOp op);

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CK(expr) ::ferry::testing::ar_gpu::cuda_check((expr), #expr)

// ---------------------------------------------------------------- shared state
struct Shared {
  std::unique_ptr<ferry::Communicator> comm;
  std::unique_ptr<ferry::AllReduce> ar;
  cudaStream_t stream = nullptr;
  char* in_buf = nullptr;
  char* out_buf = nullptr;
  uint64_t seed = 0;
  uint64_t cases = 0;
  ~Shared() {
    if (stream) cudaStreamSynchronize(stream);
    ar.reset();
    if (in_buf) cudaFree(in_buf);
    if (out_buf) cudaFree(out_buf);
    if (stream) cudaStreamDestroy(stream);
    comm.reset();
  }
  uint64_t next_seed() { return allreduce_mix(seed ^ allreduce_mix(++cases)); }  // same sequence on every rank
};
// The one Shared of the program (created on first use; see allreduce_harness.cpp).
Shared& shared();

bool spans_nodes(Shared& s);

// ---------------------------------------------------------------- one call, staged and checked
struct Job {
  AllReduceAlgorithm algo;
  DataType type;
  ReduceOp op;
  size_t count;
  const void* in;
  void* out;
  size_t guard;  // poisoned bytes checked before and after out
  uint64_t seed;
  HostCase hc;
  std::vector<uint8_t> region, in_after;
  size_t bytes() const { return count * elem_size(type); }
  bool in_place() const { return in == out; }
  std::string what() const;
};

Job make_job(Shared& s, AllReduceAlgorithm algo, DataType t, ReduceOp op, size_t count, const void* in,
             void* out, size_t guard = 0);
// Poison the output (and its guards), then upload the input.
void stage(Shared& s, Job& j);
void launch(Shared& s, Job& j);
void fetch(Shared& s, Job& j);

// Checks one fetched job on this rank; returns the hash of its output.
uint64_t verify(const Job& j);

// Runs `enqueue` (work on s.stream), synchronizes through the communicator, checks
// every job and that all ranks hold bitwise identical outputs. Collective. Returns
// false on every rank if any rank threw (the caller stops the test).
template <typename Enqueue>
bool run_and_check(Shared& s, std::vector<Job>& jobs, Enqueue&& enqueue) {
  std::string error;
  try {
    enqueue();
    s.comm->synchronize(s.stream);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const bool ok = all_ranks(error.empty());
  if (!error.empty()) ADD_FAILURE() << "threw: " << error << "\n  first job: " << jobs.front().what();
  if (!ok) return false;
  std::vector<uint64_t> hashes;
  for (const Job& j : jobs) hashes.push_back(verify(j));
  std::vector<uint64_t> all(hashes.size() * static_cast<size_t>(mpi_size()));
  MPI_Allgather(hashes.data(), static_cast<int>(hashes.size()), MPI_UINT64_T, all.data(),
                static_cast<int>(hashes.size()), MPI_UINT64_T, MPI_COMM_WORLD);
  for (size_t k = 0; k < jobs.size(); ++k)
    for (int r = 0; r < mpi_size(); ++r)
      EXPECT_EQ(all[r * hashes.size() + k], hashes[k]) << "rank " << r << " differs bitwise: " << jobs[k].what();
  return true;
}

// One eager call on the shared buffers: `in_off` / `out_off` in elements (so not
// 16-byte aligned for small values), guards poisoned around the output.
bool check_call(Shared& s, AllReduceAlgorithm algo, DataType t, ReduceOp op, size_t count, size_t in_off = 0,
                size_t out_off = 0, bool in_place = false);

// The algorithms of kAlgos this communicator supports.
std::vector<AllReduceAlgorithm> supported(Shared& s);

}  // namespace ferry::testing::ar_gpu
