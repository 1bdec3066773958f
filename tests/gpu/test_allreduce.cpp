// AllReduce on real GPUs, one call at a time (see allreduce_harness.hpp for the
// reference and what every checked call verifies): every algorithm x op x type,
// odd counts, unaligned and in-place pointers; large sums; which algorithm auto
// selects and supports, inside one node and across nodes; bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "ferry/window.hpp"
#include "gpu/allreduce_harness.hpp"
#include "net/proxy.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ar_gpu;

// ---------------------------------------------------------------- tests
class AllReduceMatrix : public ::testing::TestWithParam<std::tuple<AllReduceAlgorithm, DataType>> {};

TEST_P(AllReduceMatrix, EveryOpOddCountsUnalignedInPlace) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  const auto [algo, type] = GetParam();
  const bool pow2 = (mpi_size() & (mpi_size() - 1)) == 0;
  if (algo == AllReduceAlgorithm::kRecursiveDoubling && !spans_nodes(s)) {
    EXPECT_EQ(s.ar->supports(algo), pow2);
  }
  const bool nvlink_only = std::find(kNvlinkOnly.begin(), kNvlinkOnly.end(), algo) != kNvlinkOnly.end();
  if (spans_nodes(s)) {
    EXPECT_EQ(s.ar->supports(algo), !nvlink_only) << algo_id(algo) << " across nodes";
  } else if (algo == AllReduceAlgorithm::kHierarchical) {
    EXPECT_FALSE(s.ar->supports(algo)) << "hierarchical inside one node";
  }
  if (!s.ar->supports(algo)) {
    const std::string msg = ferry::testing::error_message<ferry::NotSupported>(
        [&] { s.ar->run(s.in_buf, s.out_buf, 16, type, ReduceOp::kSum, s.stream, algo); });
    EXPECT_NE(msg.find(algo_id(algo)), std::string::npos) << "should name the algorithm: " << msg;
    if (spans_nodes(s)) {
      EXPECT_NE(msg.find("one node"), std::string::npos) << msg;
      EXPECT_NE(msg.find("hierarchical"), std::string::npos) << msg;
    }
    EXPECT_FALSE(s.comm->aborted());
    // The communicator stays usable.
    ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, type, ReduceOp::kSum, 1001));
    GTEST_SKIP() << algo_id(algo) << " not supported on " << mpi_size() << " ranks in "
                 << s.comm->topology().num_nodes << " node(s)";
  }
  for (ReduceOp op : kOps) {
    for (size_t count : {1, 3, 1023, 4097, 65536, 65537, 300007}) ASSERT_TRUE(check_call(s, algo, type, op, count));
    ASSERT_TRUE(check_call(s, algo, type, op, 4097, /*in_off=*/1, /*out_off=*/3));
    ASSERT_TRUE(check_call(s, algo, type, op, 1023, 0, 0, /*in_place=*/true));
    ASSERT_TRUE(check_call(s, algo, type, op, 17, 0, 1, /*in_place=*/true));
  }
}

INSTANTIATE_TEST_SUITE_P(All, AllReduceMatrix, ::testing::Combine(::testing::ValuesIn(kAlgos), ::testing::ValuesIn(kTypes)),
                         [](const auto& info) {
                           return std::string(algo_id(std::get<0>(info.param))) + "_" + type_id(std::get<1>(info.param));
                         });

TEST(AllReduce, LargeSums) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  for (AllReduceAlgorithm a : supported(s)) {
    ASSERT_TRUE(check_call(s, a, DataType::kFloat32, ReduceOp::kSum, 3000017));
    ASSERT_TRUE(check_call(s, a, DataType::kBFloat16, ReduceOp::kSum, 3000017, 1, 1));
  }
  // Across nodes one launch carries at most 16 MiB (less with many nodes), so
  // these take several launches: 24 MB, 20 MB in place at an unaligned
  // address, and exactly max_bytes (32 MiB).
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kInt64, ReduceOp::kSum, 3000017));
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kFloat32, ReduceOp::kAvg, 5000011, 0, 3,
                         /*in_place=*/true));
  // Exactly max_bytes.
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kFloat64, ReduceOp::kSum, kMaxBytes / 8));
}

// Runs `checks` on a second AllReduce built with `knob` set (knobs are read when an AllReduce is built), swapped
// into the harness (check_call runs s.ar); true when every check passed.
template <class Checks>
bool with_knobbed_allreduce(Shared& s, const char* knob, const char* value, Checks checks) {
  std::unique_ptr<ferry::AllReduce> knobbed;
  {
    ferry::testing::ScopedEnv env(knob, value);
    knobbed = std::make_unique<ferry::AllReduce>(*s.comm, kMaxBytes);
  }
  std::swap(s.ar, knobbed);
  const bool ok = checks();
  std::swap(s.ar, knobbed);  // back before anything may return
  return ok;
}

// With the LL128 one-shot off (FERRY_ALLREDUCE_LL128_MAX_BYTES=0), two ranks' one-shot calls above the LL range run
// the fenced one-shot and, above 2 MiB, the pipelined one (NOTE [Pipelined one-shot];
// FERRY_ALLREDUCE_PIPELINED_MIN_BYTES): every type and op at 1 MiB and just above 2 MiB at odd counts (a partial
// last pack), unaligned, in place, and across several 32 KB steps per block. Elsewhere: plain one-shot.
TEST(AllReduce, FencedAndPipelinedOneShotEveryTypeAndOp) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  if (spans_nodes(s)) GTEST_SKIP() << "one-shot runs inside one node";
  EXPECT_TRUE(with_knobbed_allreduce(s, "FERRY_ALLREDUCE_LL128_MAX_BYTES", "0", [&] {
    bool ok = true;
    for (DataType t : kTypes) {
      const size_t sz = ferry::dtype_size(t);
      for (size_t count : {(size_t{1} << 20) / sz + 7, (size_t{2} << 20) / sz + 4097}) {
        for (ReduceOp op : kOps) ok = ok && check_call(s, AllReduceAlgorithm::kOneShot, t, op, count);
        ok = ok && check_call(s, AllReduceAlgorithm::kOneShot, t, ReduceOp::kSum, count, 1, 3);
        ok = ok && check_call(s, AllReduceAlgorithm::kOneShot, t, ReduceOp::kMax, count, 0, 0, /*in_place=*/true);
      }
    }
    // Many steps per block (a call near max_bytes, 32 MiB).
    return ok && check_call(s, AllReduceAlgorithm::kOneShot, DataType::kFloat32, ReduceOp::kSum, kMaxBytes / 4 - 5);
  }));
}

// Two ranks' one-shot calls above the LL range and up to 6 MiB (FERRY_ALLREDUCE_LL128_MAX_BYTES) take the LL128
// one-shot (NOTE [LL128 lines]). Every type and op just above the LL range, at 1 MiB, just above 2 MiB and at the
// range's end, at odd counts (a partial last unit of 30 packs), unaligned, in place; auto just past the end (the
// pipelined one-shot); back to back on fresh inputs (each check_call draws new ones: a later launch must never take
// an older launch's lines, both parities). Then one launch of 32 MiB less an element with the range raised to
// 32 MiB (many units per block). Elsewhere (3+ ranks) these are plain one-shot calls.
TEST(AllReduce, Ll128OneShotEveryTypeAndOp) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  if (spans_nodes(s)) GTEST_SKIP() << "one-shot runs inside one node";
  bool ok = true;
  const size_t end = size_t{6} << 20;
  for (DataType t : kTypes) {
    const size_t sz = ferry::dtype_size(t);
    for (size_t count : {(size_t{64} << 10) / sz + 1, (size_t{1} << 20) / sz + 29, (size_t{2} << 20) / sz + 4097,
                         end / sz}) {
      for (ReduceOp op : kOps) ok = ok && check_call(s, AllReduceAlgorithm::kOneShot, t, op, count);
      ok = ok && check_call(s, AllReduceAlgorithm::kOneShot, t, ReduceOp::kSum, count - 1, 1, 3);
    }
    ok = ok && check_call(s, AllReduceAlgorithm::kAuto, t, ReduceOp::kMax, (size_t{5} << 20) / sz + 1, 0, 0, true);
    ok = ok && check_call(s, AllReduceAlgorithm::kAuto, t, ReduceOp::kSum, end / sz + 1);
  }
  for (int round = 0; round < 4; ++round)
    ok = ok && check_call(s, AllReduceAlgorithm::kAuto, DataType::kBFloat16, ReduceOp::kSum, (size_t{4} << 20) / 2);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(with_knobbed_allreduce(s, "FERRY_ALLREDUCE_LL128_MAX_BYTES", "33554432", [&] {
    return check_call(s, AllReduceAlgorithm::kOneShot, DataType::kBFloat16, ReduceOp::kSum, kMaxBytes / 2 - 1) &&
           check_call(s, AllReduceAlgorithm::kAuto, DataType::kFloat32, ReduceOp::kAvg, kMaxBytes / 4 - 3, 2, 0);
  }));
}

// The LL one-shot's lines carry the low 32 bits of the launch's epoch as their tag; the scratch starts zeroed, so a
// launch whose low 32 bits were 0 would take zeroed lines (beyond every earlier launch's extent) as its peers' data.
// The device counter skips those epochs (NOTE [Epoch tags]). An AllReduce whose counter starts 4 launches short of
// 2^32 (FERRY_ALLREDUCE_FIRST_EPOCH) runs LL calls across the wrap, each larger than the ones before (so each reads
// lines no earlier launch wrote, on both parities), then back to back at the largest, fresh inputs each time.
TEST(AllReduce, LlTagsAcrossTheEpochWrap) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  if (spans_nodes(s)) GTEST_SKIP() << "one-shot runs inside one node";
  const std::string first_epoch = std::to_string((uint64_t{1} << 32) - 4);
  EXPECT_TRUE(with_knobbed_allreduce(s, "FERRY_ALLREDUCE_FIRST_EPOCH", first_epoch.c_str(), [&] {
    bool ok = true;
    const size_t ll_max = 16 << 10;  // LL on any rank count in a node (NOTE [LL lines]; the knob's default)
    for (size_t bytes = 1024; bytes <= ll_max; bytes += 1024)
      ok = ok && check_call(s, AllReduceAlgorithm::kAuto, DataType::kBFloat16, ReduceOp::kSum, bytes / 2);
    for (int round = 0; round < 4; ++round)
      ok = ok && check_call(s, AllReduceAlgorithm::kAuto, DataType::kFloat32, ReduceOp::kMax, ll_max / 4);
    return ok;
  }));
}

// The path taken, not a time: inside one node auto never picks hierarchical and
// the AllReduce has no window; across nodes it picks hierarchical, has a window,
// and a call goes through this rank's proxy, except where every peer of another
// node has its landing and signal words mapped here (UCX shared memory): then
// the pieces path stores data and signals itself and the proxy sees nothing
// (NOTE [Hierarchical AllReduce in pieces]; FERRY_HIERARCHICAL_PIECES=1 keeps the proxy's signals).
TEST(AllReduce, HierarchicalOnlyAcrossNodes) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  if (!spans_nodes(s)) {
    for (size_t bytes = 1; bytes <= kMaxBytes; bytes *= 2)
      EXPECT_NE(s.ar->select(bytes), AllReduceAlgorithm::kHierarchical) << bytes;
    EXPECT_EQ(s.ar->window_bytes(), 0u);
    EXPECT_EQ(s.comm->proxy(), nullptr);
    ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kBFloat16, ReduceOp::kSum, 4097));
    return;
  }
  for (size_t bytes = 1; bytes <= kMaxBytes; bytes *= 2)
    EXPECT_EQ(s.ar->select(bytes), AllReduceAlgorithm::kHierarchical) << bytes;
  EXPECT_GT(s.ar->window_bytes(), 0u);
  ASSERT_NE(s.comm->proxy(), nullptr);
  bool all_mapped = true;
  {
    ferry::Window probe(*s.comm, 4096);  // the same transport maps the AllReduce's window alike
    for (int r = 0; r < s.comm->size(); ++r)
      if (!s.comm->topology().same_node(r)) all_mapped &= probe.maps_peer(r) && probe.maps_peer_signals(r);
  }
  const char* pieces = std::getenv("FERRY_HIERARCHICAL_PIECES");
  const bool proxy_free = all_ranks(all_mapped) && !(pieces != nullptr && std::string(pieces) == "1");
  const uint64_t before = s.comm->proxy()->retired();
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kBFloat16, ReduceOp::kSum, 4097));
  if (proxy_free)
    EXPECT_EQ(s.comm->proxy()->retired(), before) << "over mapped peers a call must not go through the proxy";
  else
    EXPECT_GT(s.comm->proxy()->retired(), before) << "a call across nodes must go through the proxy";
}

TEST(AllReduce, SelectAndSupports) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  EXPECT_EQ(s.ar->max_bytes(), kMaxBytes);
  EXPECT_TRUE(s.ar->supports(AllReduceAlgorithm::kAuto));
  if (spans_nodes(s)) {
    EXPECT_TRUE(s.ar->supports(AllReduceAlgorithm::kHierarchical));
    for (AllReduceAlgorithm a : kNvlinkOnly) EXPECT_FALSE(s.ar->supports(a)) << algo_id(a);
  } else {
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot, AllReduceAlgorithm::kRing})
      EXPECT_TRUE(s.ar->supports(a)) << algo_id(a);
    EXPECT_FALSE(s.ar->supports(AllReduceAlgorithm::kHierarchical));
  }
  for (size_t bytes : {size_t{2}, size_t{1024}, size_t{65536}, size_t{1} << 20, size_t{16} << 20, kMaxBytes}) {
    const AllReduceAlgorithm a = s.ar->select(bytes);
    EXPECT_NE(a, AllReduceAlgorithm::kAuto) << bytes;
    if (spans_nodes(s)) EXPECT_EQ(a, AllReduceAlgorithm::kHierarchical) << bytes;
    else EXPECT_NE(a, AllReduceAlgorithm::kHierarchical) << bytes;
    EXPECT_TRUE(s.ar->supports(a)) << algo_id(a) << " for " << bytes;
    const auto all = s.comm->bootstrap().all_gather_value(static_cast<int>(a));
    for (int r = 0; r < mpi_size(); ++r) EXPECT_EQ(all[r], static_cast<int>(a)) << "rank " << r << ", " << bytes;
  }
}

TEST(AllReduce, BadArgumentsThrowAndLeaveTheCommunicatorUsable) {
  FERRY_REQUIRE_GPUS();
  Shared& s = shared();
  EXPECT_THROW(s.ar->run(nullptr, s.out_buf, 8, DataType::kFloat32, ReduceOp::kSum, s.stream), ferry::InvalidArgument);
  EXPECT_THROW(s.ar->run(s.in_buf, nullptr, 8, DataType::kFloat32, ReduceOp::kSum, s.stream), ferry::InvalidArgument);
  EXPECT_THROW(s.ar->run(s.in_buf, s.out_buf, 0, DataType::kFloat32, ReduceOp::kSum, s.stream), ferry::InvalidArgument);
  EXPECT_THROW(s.ar->run(s.in_buf, s.out_buf, kMaxBytes / 4 + 1, DataType::kFloat32, ReduceOp::kSum, s.stream),
               ferry::InvalidArgument);
  EXPECT_THROW(s.ar->run(s.in_buf, s.out_buf, 8, static_cast<DataType>(99), ReduceOp::kSum, s.stream),
               ferry::InvalidArgument);
  // What this communicator cannot run: the NVLink-only algorithms across nodes,
  // hierarchical inside one node.
  for (AllReduceAlgorithm a : spans_nodes(s) ? kNvlinkOnly : std::vector{AllReduceAlgorithm::kHierarchical})
    EXPECT_THROW(s.ar->run(s.in_buf, s.out_buf, 8, DataType::kFloat32, ReduceOp::kSum, s.stream, a),
                 ferry::NotSupported)
        << algo_id(a);
  EXPECT_FALSE(s.comm->aborted());
  EXPECT_NO_THROW(s.comm->check());
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kFloat32, ReduceOp::kSum, 1000));
}

}  // namespace
