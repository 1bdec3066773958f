// gtest main for multi-process tests: MPI is initialized once for the process,
// every rank runs every test, and only rank 0 prints gtest's progress (all ranks
// print failures). The process exits non-zero if any rank failed a test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "common/test_util.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ferry::testing::FailurePrinter(rank));
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("[ferry] %s on all ranks\n", any_failed ? "FAILED" : "PASSED");
  MPI_Finalize();
  return any_failed;
}
