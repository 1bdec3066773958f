// AllReduce calls in sequence on real GPUs (see allreduce_harness.hpp for the
// reference and what every checked call verifies): CUDA graph capture/replay with
// new data, long back-to-back sequences on one stream, and calls while a
// stand-in for the user's compute kernel holds most SMs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/types.hpp"
#include "gpu/allreduce_harness.hpp"
#include "gpu/sm_hog.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ar_gpu;

// ---------------------------------------------------------------- tests
// Captures ar.run into graphs (two graphs on different pointers, and one graph
// holding two calls), replays them with new data uploaded between replays on the
// stream, interleaved with eager calls.
TEST(AllReduce, GraphReplayWithNewData) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  constexpr size_t kBuf = size_t{1} << 20;
  char* pool = nullptr;
  CK(cudaMalloc(&pool, 4 * kBuf));
  // Graph A: bf16 sum, 4097; graph B: i32 max, 1023, unaligned pointers.
  const auto a_in = pool, a_out = pool + kBuf + kGuard;
  const auto b_in = pool + 2 * kBuf + 4, b_out = pool + 3 * kBuf + kGuard + 8;
  bool alive = true;
  for (AllReduceAlgorithm algo : supported(s)) {
    if (!alive) break;
    SCOPED_TRACE(algo_id(algo));
    auto job_a = [&] { return make_job(s, algo, DataType::kBFloat16, ReduceOp::kSum, 4097, a_in, a_out, kGuard); };
    auto job_b = [&] { return make_job(s, algo, DataType::kInt32, ReduceOp::kMax, 1023, b_in, b_out, kGuard); };
    cudaGraphExec_t exec[3] = {nullptr, nullptr, nullptr};
    std::string error;
    try {
      for (int g = 0; g < 3; ++g) {
        Job ja = job_a(), jb = job_b();  // only the pointers and shapes matter for capture
        cudaGraph_t graph = nullptr;
        CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeGlobal));
        try {
          if (g != 1) launch(s, ja);
          if (g != 0) launch(s, jb);
        } catch (...) {
          cudaStreamEndCapture(s.stream, &graph);
          if (graph) cudaGraphDestroy(graph);
          throw;
        }
        CK(cudaStreamEndCapture(s.stream, &graph));
        CK(cudaGraphInstantiate(&exec[g], graph, 0));
        CK(cudaGraphDestroy(graph));
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    alive = all_ranks(error.empty());
    EXPECT_TRUE(error.empty()) << "capture failed: " << error;
    for (int rep = 0; alive && rep < 5; ++rep) {
      SCOPED_TRACE("replay " + std::to_string(rep));
      std::vector<Job> jobs;
      jobs.push_back(job_a());
      jobs.push_back(job_b());
      jobs.push_back(job_a());
      jobs.push_back(job_b());
      // A, B, then the two-call graph, all queued before one synchronization.
      const bool ok = run_and_check(s, jobs, [&] {
        stage(s, jobs[0]);
        CK(cudaGraphLaunch(exec[0], s.stream));
        fetch(s, jobs[0]);
        stage(s, jobs[1]);
        CK(cudaGraphLaunch(exec[1], s.stream));
        fetch(s, jobs[1]);
        stage(s, jobs[2]);
        stage(s, jobs[3]);
        CK(cudaGraphLaunch(exec[2], s.stream));
        fetch(s, jobs[2]);
        fetch(s, jobs[3]);
      });
      // Eager calls between replays advance the same device epochs.
      alive = ok && check_call(s, algo, DataType::kFloat32, ReduceOp::kSum, 777 + 100 * rep, rep % 2, 0);
    }
    for (auto e : exec)
      if (e) cudaGraphExecDestroy(e);
  }
  EXPECT_TRUE(alive);
  cudaStreamSynchronize(s.stream);
  CK(cudaFree(pool));
}

// 200 calls on one stream, with no host synchronization inside a batch of 20:
// algorithms, types, ops, sizes, offsets and in-place alternate from call to call.
TEST(AllReduce, BackToBack) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  const std::vector<AllReduceAlgorithm> algos = supported(s);
  const std::vector<size_t> counts = {1, 31, 1000, 4097, 65537, 131075};
  constexpr int kBatch = 20, kCalls = 200;
  const size_t slot = 131075 * 8 + 2 * kGuard + 64;
  char* pool = nullptr;
  CK(cudaMalloc(&pool, 2 * slot * kBatch));
  bool ok = true;
  for (int base = 0; ok && base < kCalls; base += kBatch) {
    std::vector<Job> jobs;
    for (int k = 0; k < kBatch; ++k) {
      const int c = base + k;
      const AllReduceAlgorithm algo = algos[c % algos.size()];
      const DataType t = kTypes[(c / 3) % kTypes.size()];
      const ReduceOp op = kOps[(c * 7 / 2) % kOps.size()];
      const size_t count = counts[(c * 5) % counts.size()];
      const size_t off = (c % 3 == 1) ? elem_size(t) : 0;
      char* in = pool + (2 * k) * slot + kGuard + off;
      char* out = pool + (2 * k + 1) * slot + kGuard + 2 * off;
      jobs.push_back(make_job(s, algo, t, op, count, c % 5 == 0 ? out : in, out, kGuard));
    }
    ok = run_and_check(s, jobs, [&] {
      for (Job& j : jobs) stage(s, j);
      for (Job& j : jobs) launch(s, j);
      for (Job& j : jobs) fetch(s, j);
    });
  }
  EXPECT_TRUE(ok);
  cudaStreamSynchronize(s.stream);
  CK(cudaFree(pool));
}

// Every algorithm while a stand-in for the user's compute kernel holds all SMs
// but one or a few (issue 15): blocks pair with the same block of each peer,
// so the calls must progress on any number of free SMs. Ranks sharing a GPU
// under MPS skip (SmHog::unusable_reason).
TEST(AllReduce, RestrictedSms) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  const std::string why = SmHog::unusable_reason(s.comm->ranks_sharing_device());
  if (!why.empty()) GTEST_SKIP() << "RESTRICTED-SM TEST SKIPPED: " << why;
  // Every call once without the hog first: CUDA loads kernels lazily, and loading
  // one while the hog spins waits for the hog (its 120 s limit).
  for (AllReduceAlgorithm algo : supported(s))
    for (size_t count : {size_t{4099}, size_t{3} << 18}) {
      ASSERT_TRUE(check_call(s, algo, DataType::kBFloat16, ReduceOp::kSum, count));
      ASSERT_TRUE(check_call(s, algo, DataType::kFloat32, ReduceOp::kMax, count / 2 + 1));
    }
  for (int free_sms : {1, 3}) {
    std::unique_ptr<SmHog> hog = hold_sms_on_every_rank(free_sms);
    ASSERT_TRUE(hog != nullptr);
    for (AllReduceAlgorithm algo : supported(s))
      for (size_t count : {size_t{4099}, size_t{3} << 18}) {
        SCOPED_TRACE(std::string(algo_id(algo)) + ", " + std::to_string(free_sms) + " free SMs, count " +
                     std::to_string(count));
        ASSERT_TRUE(check_call(s, algo, DataType::kBFloat16, ReduceOp::kSum, count));
        ASSERT_TRUE(check_call(s, algo, DataType::kFloat32, ReduceOp::kMax, count / 2 + 1));
      }
  }
}

// 1000 calls queued back to back on one stream with no host synchronization
// between them (small sizes, so each launch is short and the ranks' launches
// overlap as much as they can), every one checked: the epochs, the signal
// counts and the double-buffered areas of consecutive launches.
TEST(AllReduce, ThousandBackToBackCalls) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  const std::vector<AllReduceAlgorithm> algos = supported(s);
  const std::vector<size_t> counts = {1, 7, 31, 100, 1000, 2049, 4097};
  constexpr int kCalls = 1000;
  const size_t slot = 4097 * 8 + 2 * kGuard + 64;
  char* pool = nullptr;
  CK(cudaMalloc(&pool, 2 * slot * kCalls));
  std::vector<Job> jobs;
  jobs.reserve(kCalls);
  for (int c = 0; c < kCalls; ++c) {
    const AllReduceAlgorithm algo = algos[c % algos.size()];
    const DataType t = kTypes[(c / 2) % kTypes.size()];
    const ReduceOp op = kOps[(c * 3 / 2) % kOps.size()];
    const size_t count = counts[(c * 5 + c / 7) % counts.size()];
    const size_t off = (c % 3 == 1) ? elem_size(t) : 0;
    char* in = pool + (2 * c) * slot + kGuard + off;
    char* out = pool + (2 * c + 1) * slot + kGuard + 2 * off;
    jobs.push_back(make_job(s, algo, t, op, count, c % 5 == 0 ? out : in, out, kGuard));
  }
  const bool ok = run_and_check(s, jobs, [&] {
    for (Job& j : jobs) stage(s, j);
    for (Job& j : jobs) launch(s, j);
    for (Job& j : jobs) fetch(s, j);
  });
  EXPECT_TRUE(ok);
  cudaStreamSynchronize(s.stream);
  CK(cudaFree(pool));
}

// Each call reads the output of the call before it on the stream (a chain of 6
// int64 sums, nothing else between them, one synchronization at the end): the
// one-shot kernels start before the previous grid ends (NOTE [AllReduce
// launches]) and must read their input only after it completes. Every rank
// derives every rank's input from the shared seed; after the chain each element
// is world^5 x the sum over ranks of its first input.
TEST(AllReduce, ChainedCallsReadThePreviousOutput) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  const int world = s.comm->size(), rank = s.comm->rank();
  constexpr int kChain = 6;
  // LL, fenced one-shot and (two ranks) both one-shot forms; other algorithms as they come.
  for (size_t count : {size_t{1000}, size_t{40000}, size_t{200000}}) {
    std::vector<AllReduceAlgorithm> algos = supported(s);
    algos.push_back(AllReduceAlgorithm::kAuto);
    for (AllReduceAlgorithm algo : algos) {
      SCOPED_TRACE(std::string(algo_id(algo)) + ", count " + std::to_string(count));
      const uint64_t seed = s.next_seed();
      auto input = [&](int r, size_t i) {
        return static_cast<int64_t>(allreduce_mix(seed ^ (uint64_t(r) << 40) ^ i) % 101) - 50;
      };
      std::vector<int64_t> host(count), expected(count);
      int64_t scale = 1;
      for (int c = 1; c < kChain; ++c) scale *= world;
      for (size_t i = 0; i < count; ++i) {
        host[i] = input(rank, i);
        int64_t sum = 0;
        for (int r = 0; r < world; ++r) sum += input(r, i);
        expected[i] = sum * scale;
      }
      int64_t* buf[3] = {};
      for (auto& b : buf) CK(cudaMalloc(&b, count * sizeof(int64_t)));
      CK(cudaMemcpyAsync(buf[0], host.data(), count * sizeof(int64_t), cudaMemcpyHostToDevice, s.stream));
      CK(cudaMemsetAsync(buf[1], 0xff, count * sizeof(int64_t), s.stream));
      CK(cudaMemsetAsync(buf[2], 0xff, count * sizeof(int64_t), s.stream));
      std::string error;
      try {
        for (int c = 0; c < kChain; ++c) {
          const int64_t* in = c == 0 ? buf[0] : buf[1 + (c - 1) % 2];
          s.ar->run(in, buf[1 + c % 2], count, DataType::kInt64, ReduceOp::kSum, s.stream, algo);
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::vector<int64_t> result(count, 0);
      CK(cudaMemcpyAsync(result.data(), buf[1 + (kChain - 1) % 2], count * sizeof(int64_t), cudaMemcpyDeviceToHost,
                         s.stream));
      CK(cudaStreamSynchronize(s.stream));
      for (auto b : buf) CK(cudaFree(b));
      size_t wrong = 0, first_wrong = count;
      for (size_t i = 0; i < count; ++i)
        if (result[i] != expected[i] && wrong++ == 0) first_wrong = i;
      EXPECT_TRUE(error.empty()) << error;
      EXPECT_EQ(wrong, 0u) << "first wrong element " << first_wrong << ": got "
                           << (first_wrong < count ? result[first_wrong] : 0) << ", expected "
                           << (first_wrong < count ? expected[first_wrong] : 0);
      ASSERT_TRUE(all_ranks(error.empty() && wrong == 0));
    }
  }
}

}  // namespace
