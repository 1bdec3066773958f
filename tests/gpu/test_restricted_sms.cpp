// EP dispatch/combine while a stand-in for the user's compute kernel holds all
// SMs but one or a few (issue 15): every EP kernel must progress on whatever
// SMs are free. Covers both modes, the overlapped halves (dispatch()/combine():
// NOTE [Overlapped halves and free SMs]) and the separate halves, a layout of
// several blocks (NOTE [EP layout scan]), skewed routing and -1 experts.
// AllReduce has its own case in test_allreduce_sequences.cpp (AllReduce.RestrictedSms).
// Ranks sharing a GPU under MPS skip (SmHog::unusable_reason); the device
// script restricts them with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE instead.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>
#include <string>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/sm_hog.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;

// FERRY_TEST_FREE_SMS (default "1 3"): the free-SM counts to try.
std::vector<int> free_sm_counts() {
  std::vector<int> counts;
  const char* env = std::getenv("FERRY_TEST_FREE_SMS");
  std::istringstream in(env != nullptr && *env != '\0' ? env : "1 3");
  for (int n = 0; in >> n;) counts.push_back(n);
  return counts;
}

TEST(EpRestrictedSms, DispatchAndCombineOnFewFreeSms) {
  REQUIRE_EP();
  const std::string why = SmHog::unusable_reason(shared().comm->ranks_sharing_device());
  if (!why.empty()) GTEST_SKIP() << "RESTRICTED-SM TEST SKIPPED: " << why;
  for (EpMode mode : kModes) {
    // High-throughput: 1024 tokens, a layout of 4 blocks; low-latency: fp8.
    const bool ht = mode == EpMode::kHighThroughput;
    const EpConfig cfg = ht ? make_config(mode, DataType::kBFloat16, 1024, 1024, 8, 4)
                            : make_config(mode, DataType::kFloat8E4M3, 64, 2048, 6, 3);
    Harness h(shared(), cfg);
    ASSERT_TRUE(h.alive());
    // The same rounds once without the hog first: they size the harness's
    // buffers; a cudaFree (it synchronizes the whole device) or a lazy kernel
    // load while the hog holds the SMs would wait for the hog (seen: 120 s, its
    // limit). The halves below run kernels these rounds do not (the one-role
    // combine, NOTE [EP combine one role]): run alone (device_run.sh's
    // restricted_* stages), this test fails if the EpBuffer stops loading its
    // kernels when it is built (ep_params.hpp, load_*_kernels; session 24).
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
    ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kSomeZero, {}, false, 0));
    for (int free_sms : free_sm_counts()) {
      SCOPED_TRACE(std::string(mode_id(mode)) + ", " + std::to_string(free_sms) + " free SMs");
      std::unique_ptr<SmHog> hog = hold_sms_on_every_rank(free_sms);
      ASSERT_TRUE(hog != nullptr);
      Harness::Options overlapped;  // dispatch() and combine(): both halves at once
      Harness::Options halves;
      halves.halves = true;
      const auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull, overlapped));
      ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried, halves));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kSomeZero, overlapped, false, 0));
      if (mpi_rank() == 0)  // for the log: progress, never checked
        std::printf("[ferry] %s with %d free SMs: 3 rounds in %.2f s\n", mode_id(mode), free_sms,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
}

}  // namespace
