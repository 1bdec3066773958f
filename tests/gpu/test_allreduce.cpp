// AllReduce on real GPUs (mpirun -np 2/4/8, one GPU per rank), against a host
// reference: every rank generates its input from (seed, rank), so every rank can
// compute the full reference. Covers every algorithm x op x type, odd counts,
// unaligned and in-place pointers, untouched guards around the output, unchanged
// inputs, bitwise identical results on every rank, CUDA graph capture/replay with
// new data, and long back-to-back sequences on one stream.
// Across nodes (FERRY_RANKS_PER_NODE=k makes virtual nodes; with
// FERRY_TEST_SHARE_GPUS=1 several ranks share a GPU) the same tests run the
// hierarchical algorithm (and auto, which picks it); the NVLink-only algorithms
// must refuse with NotSupported and leave the communicator usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/expect_error.hpp"
#include "common/allreduce_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "gpu/sm_hog.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "net/proxy.hpp"

namespace {

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::ReduceOp;
using namespace ferry::testing;

constexpr size_t kMaxBytes = size_t{32} << 20;
constexpr size_t kGuard = 256;  // poisoned bytes checked on both sides of an output
const std::vector<AllReduceAlgorithm> kAlgos = {AllReduceAlgorithm::kAuto,         AllReduceAlgorithm::kOneShot,
                                                AllReduceAlgorithm::kTwoShot,      AllReduceAlgorithm::kRing,
                                                AllReduceAlgorithm::kRecursiveDoubling,
                                                AllReduceAlgorithm::kHierarchical};
// The algorithms that need every rank in one node.
const std::vector<AllReduceAlgorithm> kNvlinkOnly = {AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
                                                     AllReduceAlgorithm::kRing,
                                                     AllReduceAlgorithm::kRecursiveDoubling};
const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,
                                      DataType::kInt64,   DataType::kBFloat16, DataType::kFloat16};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

// Own names (valid gtest identifiers), independent of the library's.
const char* algo_id(AllReduceAlgorithm a) {
  return std::array{"auto", "one_shot", "two_shot", "ring", "recursive_doubling", "hierarchical"}[static_cast<int>(a)];
}
const char* type_id(DataType t) { return std::array{"f32", "f64", "i32", "i64", "bf16", "f16"}[static_cast<int>(t)]; }
const char* op_id(ReduceOp op) { return std::array{"sum", "prod", "min", "max", "avg"}[static_cast<int>(op)]; }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CK(expr) cuda_check((expr), #expr)


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
std::unique_ptr<Shared>& shared_slot() {
  static std::unique_ptr<Shared> s;
  return s;
}
// Collective on first use; every rank runs the same tests in the same order.
Shared& shared() {
  auto& s = shared_slot();
  if (s) return *s;
  s = std::make_unique<Shared>();
  s->comm = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>());
  s->ar = std::make_unique<ferry::AllReduce>(*s->comm, kMaxBytes);
  CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&s->in_buf, kMaxBytes + 4 * kGuard));
  CK(cudaMalloc(&s->out_buf, kMaxBytes + 4 * kGuard));
  s->seed = ferry::testing::broadcast_test_seed("allreduce");
  return *s;
}
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new ferry::testing::TearDownEnvironment([] { shared_slot().reset(); }));

bool spans_nodes(Shared& s) { return s.comm->topology().num_nodes > 1; }

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

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
  std::string what() const {
    std::ostringstream os;
    os << algo_id(algo) << " " << type_id(type) << " " << op_id(op) << " count " << count << " in "
       << in << " out " << out << (in_place() ? " in-place" : "") << " seed " << seed << " (rank "
       << mpi_rank() << " of " << mpi_size() << ")";
    return os.str();
  }
};

Job make_job(Shared& s, AllReduceAlgorithm algo, DataType t, ReduceOp op, size_t count, const void* in,
             void* out, size_t guard = 0) {
  Job j{algo, t, op, count, in, out, guard, s.next_seed(), {}, {}, {}};
  const AllReduceAlgorithm runs = algo == AllReduceAlgorithm::kAuto ? s.ar->select(j.bytes()) : algo;
  const int node_partials = runs == AllReduceAlgorithm::kHierarchical ? s.comm->topology().num_nodes : 0;
  j.hc = make_case(t, op, count, j.seed, mpi_rank(), mpi_size(), node_partials);
  return j;
}
// Poison the output (and its guards), then upload the input.
void stage(Shared& s, Job& j) {
  CK(cudaMemsetAsync(static_cast<char*>(j.out) - j.guard, 0xFF, j.bytes() + 2 * j.guard, s.stream));
  CK(cudaMemcpyAsync(const_cast<void*>(j.in), j.hc.input.data(), j.bytes(), cudaMemcpyHostToDevice, s.stream));
}
void launch(Shared& s, Job& j) { s.ar->run(j.in, j.out, j.count, j.type, j.op, s.stream, j.algo); }
void fetch(Shared& s, Job& j) {
  j.region.assign(j.bytes() + 2 * j.guard, 0);
  CK(cudaMemcpyAsync(j.region.data(), static_cast<char*>(j.out) - j.guard, j.region.size(), cudaMemcpyDeviceToHost, s.stream));
  if (!j.in_place()) {
    j.in_after.assign(j.bytes(), 0);
    CK(cudaMemcpyAsync(j.in_after.data(), j.in, j.bytes(), cudaMemcpyDeviceToHost, s.stream));
  }
}

// Checks one fetched job on this rank; returns the hash of its output.
uint64_t verify(const Job& j) {
  const uint8_t* out = j.region.data() + j.guard;
  const size_t sz = elem_size(j.type);
  size_t bad_guard = 0, bad = 0;
  for (size_t i = 0; i < j.guard; ++i) bad_guard += (j.region[i] != 0xFF) + (out[j.bytes() + i] != 0xFF);
  std::ostringstream first;
  for (size_t i = 0; i < j.count; ++i) {
    bool ok;
    if (is_int(j.type)) {
      const int64_t got = load_int(j.type, out + i * sz);
      ok = got == j.hc.iref[i];
      if (!ok && bad < 5) first << "\n  [" << i << "] got " << got << " want " << j.hc.iref[i];
    } else {
      const double got = load_float(j.type, out + i * sz);
      ok = std::fabs(got - j.hc.ref[i]) <= j.hc.tol[i];  // false for NaN (the poison)
      if (!ok && bad < 5) first << "\n  [" << i << "] got " << got << " want " << j.hc.ref[i] << " +- " << j.hc.tol[i];
    }
    bad += !ok;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << j.count << " elements wrong: " << j.what() << first.str();
  EXPECT_EQ(bad_guard, 0u) << "wrote outside the output: " << j.what();
  if (!j.in_place()) {
    EXPECT_TRUE(j.in_after == j.hc.input) << "input modified: " << j.what();
  }
  return fnv1a(out, j.bytes());
}

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
                size_t out_off = 0, bool in_place = false) {
  const size_t sz = elem_size(t);
  char* out = s.out_buf + 2 * kGuard + out_off * sz;
  const char* in = in_place ? out : s.in_buf + 2 * kGuard + in_off * sz;
  std::vector<Job> jobs;
  jobs.push_back(make_job(s, algo, t, op, count, in, out, kGuard));
  return run_and_check(s, jobs, [&] {
    stage(s, jobs[0]);
    launch(s, jobs[0]);
    fetch(s, jobs[0]);
  });
}

std::vector<AllReduceAlgorithm> supported(Shared& s) {
  std::vector<AllReduceAlgorithm> v;
  for (AllReduceAlgorithm a : kAlgos)
    if (s.ar->supports(a)) v.push_back(a);
  return v;
}

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

// The path taken, not a time: inside one node auto never picks hierarchical and
// the AllReduce has no window; across nodes it picks hierarchical, has a window,
// and a call goes through this rank's proxy.
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
  const uint64_t before = s.comm->proxy()->retired();
  ASSERT_TRUE(check_call(s, AllReduceAlgorithm::kAuto, DataType::kBFloat16, ReduceOp::kSum, 4097));
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

}  // namespace
