// Device timeouts (mpirun -np N, one GPU per rank): every rank but the last calls
// AllReduce::run, the last one does not. With a 1000 ms timeout the callers'
// synchronize throws TimeoutError naming rank, peer and phase, soon after the
// deadline; the communicator is then aborted and refuses further work. Each case
// builds its own Communicator (it ends up aborted) and every rank leaves it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/device/timeout.cuh"
#include "ferry/error.hpp"

namespace {

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::ReduceOp;
using namespace ferry::testing;  // mpi_rank, all_ranks, user_part, ...
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = std::chrono::milliseconds(1000);
constexpr size_t kCount = 4096;

// `word` followed, within a few non-digit characters, by the number n.
bool names(const std::string& what, const std::string& word, int n) {
  const std::regex re(word + "[^0-9]{0,12}" + std::to_string(n) + "([^0-9]|$)", std::regex::icase);
  return std::regex_search(user_part(what), re);
}
bool names_a_phase(const std::string& what) {
  for (int p = ferry::kPhaseOneShotExchange; p <= ferry::kPhaseEpCombine; ++p)
    if (what.find(ferry::phase_name(p)) != std::string::npos) return true;
  for (int p : {ferry::kPhaseHierarchicalReduceScatter, ferry::kPhaseHierarchicalInterNode,
                ferry::kPhaseHierarchicalAllGather})
    if (what.find(ferry::phase_name(p)) != std::string::npos) return true;
  return false;
}

// Waits for `stream` with a host deadline far beyond the device timeout: if the
// device timeout never fires, fail loudly and end the job instead of hanging.
void wait_or_die(cudaStream_t stream, const char* what) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "[rank %d] %s: still running 60 s after launch with a %lld ms device timeout\n",
                   mpi_rank(), what, static_cast<long long>(kTimeout.count()));
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One case on a fresh communicator. `peer_known`: the algorithm only waits on the
// missing rank directly, so the message must name it as the peer.
void timeout_case(AllReduceAlgorithm algo, bool peer_known) {
  ferry::CommunicatorOptions options;
  options.timeout = kTimeout;
  auto comm = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>(), options);
  // The NVLink algorithms run inside one node, hierarchical across nodes.
  const bool across_nodes = algo == AllReduceAlgorithm::kHierarchical;
  if ((comm->topology().num_nodes > 1) != across_nodes)
    GTEST_SKIP() << ferry::algorithm_name(algo) << " does not run on " << comm->topology().num_nodes << " node(s)";
  EXPECT_EQ(comm->timeout_ns(), 1000000000ull);
  auto ar = std::make_unique<ferry::AllReduce>(*comm, kCount * sizeof(float));
  if (!ar->supports(algo)) GTEST_SKIP() << ferry::algorithm_name(algo) << " not supported on " << mpi_size();

  cudaStream_t stream = nullptr;
  float* in = nullptr;
  float* out = nullptr;
  const bool ready = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
                     cudaMalloc(&in, kCount * sizeof(float)) == cudaSuccess &&
                     cudaMalloc(&out, kCount * sizeof(float)) == cudaSuccess &&
                     cudaMemset(in, 0, kCount * sizeof(float)) == cudaSuccess;
  ASSERT_TRUE(all_ranks(ready)) << "stream / buffers";

  // A complete call on every rank first: the timeout below is not a setup problem.
  std::string warmup_error;
  try {
    ar->run(in, out, kCount, DataType::kFloat32, ReduceOp::kSum, stream, algo);
    comm->synchronize(stream);
  } catch (const std::exception& e) {
    warmup_error = e.what();
  }
  EXPECT_EQ(warmup_error, "");
  const bool warm = all_ranks(warmup_error.empty());

  const int last = mpi_size() - 1;
  const int rank = mpi_rank();
  if (warm && rank != last) {
    std::string msg;
    const auto t0 = Clock::now();
    try {
      ar->run(in, out, kCount, DataType::kFloat32, ReduceOp::kSum, stream, algo);
      wait_or_die(stream, ferry::algorithm_name(algo));
      comm->synchronize(stream);
      ADD_FAILURE() << "synchronize returned normally although rank " << last << " never joined";
    } catch (const ferry::TimeoutError& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected TimeoutError, got: " << e.what();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!msg.empty()) {
      EXPECT_TRUE(names(msg, "rank", rank)) << "should name this rank " << rank << ": " << msg;
      EXPECT_TRUE(names_a_phase(msg)) << "should name the phase: " << msg;
      if (peer_known) {
        EXPECT_TRUE(names(msg, "peer", last)) << "should name the missing peer " << last << ": " << msg;
      } else {
        EXPECT_NE(user_part(msg).find("peer"), std::string::npos) << "should name the peer: " << msg;
      }
      EXPECT_GE(seconds, 0.9) << "gave up before the 1000 ms deadline";
      EXPECT_LT(seconds, 8.0) << "the configured 1000 ms timeout was not used (default is 10 s)";
    }
    EXPECT_TRUE(comm->aborted());
    EXPECT_THROW(comm->check(), ferry::AbortedError);
    EXPECT_THROW(ar->run(in, out, kCount, DataType::kFloat32, ReduceOp::kSum, stream, algo), ferry::AbortedError);
    EXPECT_THROW(ar->run(in, out, 16, DataType::kBFloat16, ReduceOp::kMax, stream), ferry::AbortedError);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == last) {
    // The rank that skipped never saw an error; abort it too so every rank tears
    // down the same (aborted) state.
    EXPECT_FALSE(comm->aborted());
    comm->abort("test: the other ranks timed out");
    EXPECT_TRUE(comm->aborted());
    EXPECT_THROW(ar->run(in, out, kCount, DataType::kFloat32, ReduceOp::kSum, stream, algo), ferry::AbortedError);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  cudaStreamSynchronize(stream);
  ar.reset();
  comm.reset();
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(stream);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Timeout, OneShotNamesRankPeerAndPhaseThenAborts) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  timeout_case(AllReduceAlgorithm::kOneShot, /*peer_known=*/true);
}

TEST(Timeout, TwoShotTimesOutAndAborts) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  timeout_case(AllReduceAlgorithm::kTwoShot, false);
}

TEST(Timeout, RingTimesOutAndAborts) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  timeout_case(AllReduceAlgorithm::kRing, false);
}

TEST(Timeout, RecursiveDoublingTimesOutAndAborts) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  timeout_case(AllReduceAlgorithm::kRecursiveDoubling, false);
}

// Across nodes only (FERRY_RANKS_PER_NODE): ranks wait on the missing one
// directly or through a peer that waits on it.
TEST(Timeout, HierarchicalTimesOutAndAborts) {
  FERRY_REQUIRE_GPUS();
  if (mpi_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  timeout_case(AllReduceAlgorithm::kHierarchical, false);
}

}  // namespace
