// Helpers shared by the multi-process and GPU tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "ferry/bootstrap.hpp"

namespace ferry::testing {

// Prints only failures (used on ranks other than 0).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
    }
  }

 private:
  int rank_;
};

inline int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int mpi_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// FERRY_TEST_SHARE_GPUS=1: ranks may share GPUs ("virtual ranks": several
// processes on one GPU, each its own context, the GPU time-sliced between them).
// It checks the protocols at world sizes above the GPU count; its timings mean
// nothing.
inline bool share_gpus() {
  const char* env = std::getenv("FERRY_TEST_SHARE_GPUS");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

// Number of GPUs usable by this job: 0 when there is no GPU, or fewer GPUs than
// ranks (each rank needs its own GPU, unless share_gpus()). Same answer on every rank.
inline int usable_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  cudaGetLastError();
  int min_count = count;
  MPI_Allreduce(&count, &min_count, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_count >= 1 && share_gpus()) return min_count;
  return min_count >= mpi_size() ? min_count : 0;
}

// Skips the test, loudly, when the job has no GPU per rank.
#define FERRY_REQUIRE_GPUS()                                                              \
  do {                                                                                    \
    if (::ferry::testing::usable_gpus() == 0) {                                           \
      if (::ferry::testing::mpi_rank() == 0)                                              \
        std::printf("*** FERRY GPU TESTS SKIPPED: no GPU for each of the %d ranks ***\n", \
                    ::ferry::testing::mpi_size());                                        \
      GTEST_SKIP() << "FERRY GPU TESTS SKIPPED: no GPU per rank";                        \
    }                                                                                     \
  } while (0)

// Every rank agrees on a boolean (logical AND): use before ASSERTs that could
// diverge between ranks, so no rank is left waiting in a collective.
inline bool all_ranks(bool ok) {
  int v = ok ? 1 : 0, r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return r == 1;
}

// A fresh random seed chosen on rank 0 (or FERRY_TEST_SEED), printed so a run can
// be repeated, and broadcast: every rank regenerates every rank's inputs from it.
inline unsigned long long broadcast_test_seed(const char* suite) {
  unsigned long long seed = 0;
  if (mpi_rank() == 0) {
    const char* env = std::getenv("FERRY_TEST_SEED");
    seed = env ? std::strtoull(env, nullptr, 0) : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    std::printf("[ferry] %s tests: seed %llu (FERRY_TEST_SEED=%llu repeats it)\n", suite, seed, seed);
  }
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  return seed;
}

// Runs `fn` when the test program ends, before MPI finalizes: frees a suite's
// shared state (communicator, buffers) while CUDA and MPI are still up.
class TearDownEnvironment : public ::testing::Environment {
 public:
  explicit TearDownEnvironment(std::function<void()> fn) : fn_(std::move(fn)) {}
  void TearDown() override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace ferry::testing
