// Soak: long runs of EP dispatch/combine and AllReduce calls on real GPUs
// (mpirun -np 2/4/8; FERRY_TEST_SHARE_GPUS=1 lets ranks share GPUs,
// FERRY_RANKS_PER_NODE=k makes virtual nodes), checked against the host
// references periodically, with device and host memory measured after a warm-up,
// at half the calls and at the end (gpu/soak_memory.hpp). Not in ctest: scripts/device_run.sh runs it (stage soak,
// FERRY_SOAK=1). SKIPPED (loudly) where no GPU is present.
//
//   Soak.EpHighThroughput, Soak.EpLowLatency: FERRY_SOAK_EP_CALLS (10000)
//     dispatch+combine calls back to back on one stream (the pattern of
//     test_ep_sequences.cpp back_to_back: input sets resident on the device, the
//     dispatch output fed back as the expert outputs, no host synchronization
//     except at the checked calls). Each call picks one of kSets input sets;
//     every set is regenerated at every check (fresh routing: uniform, zipf,
//     drops, one hot rank, one hot expert, none; token counts full, varied,
//     some/all zero, and ranks cut to 0 or 1 token).
//   Soak.AllReduce: a warm-up sweep (every supported algorithm x type x op,
//     and the largest call of each type, checked), then FERRY_SOAK_AR_CALLS (10000) calls of random algorithm
//     (kAuto and those supports() accepts), type, op, size (1 element ..
//     FERRY_SOAK_AR_MAX_BYTES, log-uniform), offset and in-place; the checked
//     calls run on fresh inputs against test_allreduce.cpp's exact reference
//     (copied below) and must be bitwise identical on every rank; the others run
//     on whatever the buffers hold (no host synchronization).
//
// Checks: the first call, every FERRY_SOAK_CHECK_EVERY-th (100) and the last.
// Memory: cudaMemGetInfo's free bytes, VmRSS and malloc's bytes in use, after the
// warm-up (EP: the first check at or after FERRY_SOAK_WARMUP calls, default 200),
// at half the calls (EP: the first check from there) and at the end. A leak grows
// with the calls, so the second half must show none: the free bytes may drop by
// FERRY_SOAK_STEADY_DEVICE_SLACK_MB (2, one allocation granule), malloc's bytes in
// use grow by FERRY_SOAK_STEADY_HEAP_SLACK_MB (1) and VmRSS outside malloc's heap by
// FERRY_SOAK_STEADY_RSS_SLACK_MB (8). Over the whole run (one-time costs included:
// lazily loaded code, memory malloc keeps) the free bytes may drop by
// FERRY_SOAK_DEVICE_SLACK_MB (16) and VmRSS grow by FERRY_SOAK_RSS_SLACK_MB (64).
// With shared GPUs the free bytes are the GPU's, so they include the other ranks
// on it. Each test ends with one line per rank.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/allreduce_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/soak_memory.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
using namespace ferry::testing::soak;
namespace ep = ferry::testing::ep;
using ferry::AllReduceAlgorithm;
using ferry::ReduceOp;

constexpr int kMaxFailedChecks = 3;  // a soak stops after this many failed checks (decided together)

// ---------------------------------------------------------------- EP
// A fresh problem (the same on every rank): routing, token counts, and some
// ranks cut to 0 or 1 token.
struct EpSet {
  ep::Spec spec;
  std::vector<ep::RankInput> inputs;
  std::string what;
};
EpSet make_set(const EpConfig& cfg, uint64_t seed) {
  ep::Rng rng(seed);
  const int W = mpi_size();
  using R = ep::Routing;
  using C = ep::TokenCounts;
  static const R kRoutings[] = {R::kUniform, R::kUniform, R::kZipf,    R::kZipf,      R::kDrops,
                                R::kDrops,   R::kOneRank, R::kOneRank, R::kOneExpert, R::kNone};
  static const C kCounts[] = {C::kFull,     C::kVaried,   C::kVaried,    C::kVaried,
                              C::kSomeZero, C::kSomeZero, C::kOnlyRank0, C::kAllZero};
  const ep::Routing routing = kRoutings[rng.below(static_cast<int>(std::size(kRoutings)))];
  const ep::TokenCounts counts = kCounts[rng.below(static_cast<int>(std::size(kCounts)))];
  const int hot = routing == ep::Routing::kOneExpert ? rng.below(cfg.num_experts) : rng.below(W);
  EpSet set;
  set.spec = make_spec(cfg, rng.next(), routing, counts, false, hot);
  set.inputs = ep::make_all_inputs(set.spec);
  std::ostringstream tokens;
  for (int r = 0; r < W; ++r) {
    ep::RankInput& in = set.inputs[r];
    const int cut = rng.below(12);  // 1/6: 1 token, 1/12: none
    const int n = cut < 2 ? std::min(in.num_tokens, 1) : cut == 2 ? 0 : in.num_tokens;
    in.num_tokens = n;
    in.idx.resize(static_cast<size_t>(n) * cfg.topk);
    if (set.spec.with_weights) in.weights.resize(static_cast<size_t>(n) * cfg.topk);
    in.x.resize(static_cast<size_t>(n) * cfg.hidden);
    tokens << (r ? "," : "") << n;
  }
  set.what = describe(cfg, set.spec) + " tokens [" + tokens.str() + "]";
  return set;
}

// Host bytes the input sets hold (they change size at every refresh).
size_t held_bytes(const std::vector<EpSet>& sets) {
  size_t bytes = 0;
  for (const EpSet& set : sets) {
    bytes += set.inputs.capacity() * sizeof(ep::RankInput) + set.what.capacity();
    for (const ep::RankInput& in : set.inputs)
      bytes += in.idx.capacity() * 8 + in.weights.capacity() * 4 + in.x.capacity() * 2 + in.q.capacity() +
               in.scales.capacity() * 4;
  }
  return bytes;
}

void ep_soak(EpMode mode) {
  const int me = mpi_rank();
  const long calls = env_long("FERRY_SOAK_EP_CALLS", 10000), warm = env_long("FERRY_SOAK_WARMUP", 200);
  const EpConfig cfg = make_config(mode, DataType::kBFloat16, 32, 2048, 8, 4);
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  const int T = cfg.max_tokens_per_rank, H = cfg.hidden, K = cfg.topk;
  constexpr int kSets = 8;
  std::vector<EpSet> sets(kSets);
  DevMem tok[kSets], idx[kSets], w[kSets];
  for (int i = 0; i < kSets; ++i) {  // at their largest once, so a refresh never reallocates
    tok[i].ensure(static_cast<size_t>(T) * H * 2);
    idx[i].ensure(static_cast<size_t>(T) * K * 8);
    w[i].ensure(static_cast<size_t>(T) * K * 4);
  }
  // Every set regenerated and uploaded (the stream is idle: only at checks).
  auto refresh = [&] {
    for (int i = 0; i < kSets; ++i) {
      sets[i] = make_set(cfg, shared().next_seed());
      const ep::RankInput& in = sets[i].inputs[me];
      const size_t n = static_cast<size_t>(in.num_tokens);
      if (!n) continue;
      CK(cudaMemcpyAsync(tok[i].get(), in.x.data(), n * H * 2, cudaMemcpyHostToDevice, h.stream()));
      CK(cudaMemcpyAsync(idx[i].get(), in.idx.data(), n * K * 8, cudaMemcpyHostToDevice, h.stream()));
      CK(cudaMemcpyAsync(w[i].get(), in.weights.data(), n * K * 4, cudaMemcpyHostToDevice, h.stream()));
    }
    CK(cudaStreamSynchronize(h.stream()));
  };
  Summary sum;
  sum.what = std::string("ep ") + mode_id(mode);
  std::string error;
  try { refresh(); } catch (const std::exception& e) { error = e.what(); }
  ASSERT_TRUE(all_ranks(error.empty())) << error;
  ep::Rng pick(shared().next_seed());  // which set and which call form: the same on every rank
  long measure_at = 0;  // measured at the top of the next call, when the last check's buffers are gone
  for (long c = 0; c < calls; ++c) {
    if (measure_at) measure_progress(sum, measure_at, warm, calls, h.stream(), held_bytes(sets));
    measure_at = 0;
    const int set = pick.below(kSets);
    const bool halves = pick.below(2) == 1;
    const EpSet& es = sets[set];
    const int n = es.inputs[me].num_tokens;
    const bool check = is_check(c, calls);
    DispatchResult r;
    std::vector<uint16_t> out;
    std::vector<uint8_t> guard;
    Received rx;
    if (error.empty()) {
      try {
        if (check) h.poison_out();
        r = h.unsynced_identity_round(tok[set].get(), idx[set].get(), w[set].get(), n, halves);
        ++sum.calls;
        if (check) {
          shared().comm->synchronize(h.stream());
          rx = fetch(r, cfg, h.local_experts(), h.stream());
          h.fetch_out(n, &out, &guard);
        }
      } catch (const std::exception& e) {
        error = e.what() + std::string(" (call ") + std::to_string(c) + ", " + es.what + ")";
      }
    }
    progress(sum, c, calls);
    if (!check) continue;
    if (!all_ranks(error.empty())) break;
    const std::string what = es.what + (halves ? " halves" : "") + " call " + std::to_string(c);
    const int failed_before = failed_parts();
    DispatchExpect ex;
    ex.sync_counts = false;
    verify_dispatch(r, rx, cfg, es.spec, es.inputs, ex, what);
    const ep::CombineRef ref =
        ep::combine_reference(es.spec, es.inputs[me], ep::ExpertKind::kIdentity, h.buf().hierarchical());
    verify_combine(out, guard, ref, n, H, what);
    ++sum.checks;
    sum.failed_checks += failed_parts() > failed_before;
    if (!all_ranks(sum.failed_checks < kMaxFailedChecks)) break;
    try { refresh(); } catch (const std::exception& e) { error = e.what(); }
    if (!all_ranks(error.empty())) break;
    measure_at = c + 1;
  }
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(sum.calls, calls);
  EXPECT_EQ(sum.failed_checks, 0) << sum.what;
  finish(sum, h.stream(), held_bytes(sets));
}

TEST(Soak, EpHighThroughput) {
  REQUIRE_EP();
  ep_soak(EpMode::kHighThroughput);
}

TEST(Soak, EpLowLatency) {
  REQUIRE_EP();
  ep_soak(EpMode::kLowLatency);
}

// ---------------------------------------------------------------- AllReduce
// Inputs and exact reference: tests/common/allreduce_reference.hpp (as test_allreduce.cpp).

constexpr size_t kGuard = 256;  // poisoned bytes checked on both sides of a checked output
const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                           DataType::kInt64,   DataType::kBFloat16, DataType::kFloat16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};

// The AllReduce's own communicator (as in gpu/allreduce_harness.cpp), freed with it at the end.
struct ArShared {
  std::unique_ptr<ferry::Communicator> comm;
  std::unique_ptr<ferry::AllReduce> ar;
  cudaStream_t stream = nullptr;
  char *in_buf = nullptr, *out_buf = nullptr;
  size_t max_bytes = 0;
  uint64_t seed = 0;
  ~ArShared() {
    if (stream) cudaStreamSynchronize(stream);
    ar.reset();
    if (in_buf) cudaFree(in_buf);
    if (out_buf) cudaFree(out_buf);
    if (stream) cudaStreamDestroy(stream);
    comm.reset();
  }
};
std::unique_ptr<ArShared>& ar_slot() {
  static std::unique_ptr<ArShared> s;
  return s;
}
ArShared& ar_shared() {
  auto& s = ar_slot();
  if (s) return *s;
  s = std::make_unique<ArShared>();
  s->max_bytes = static_cast<size_t>(std::max(64L, env_long("FERRY_SOAK_AR_MAX_BYTES", 4L << 20)));
  s->comm = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>());
  s->ar = std::make_unique<ferry::AllReduce>(*s->comm, s->max_bytes);
  CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&s->in_buf, s->max_bytes + 4 * kGuard));
  CK(cudaMalloc(&s->out_buf, s->max_bytes + 4 * kGuard));
  s->seed = broadcast_test_seed("soak allreduce");
  return *s;
}
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new TearDownEnvironment([] { ar_slot().reset(); }));

struct ArCall {
  AllReduceAlgorithm algo;
  DataType type;
  ReduceOp op;
  size_t count, off;  // off: elements the pointers are moved by (0..3: unaligned)
  bool in_place;
  size_t bytes() const { return count * elem_size(type); }
  char* out(ArShared& s) const { return s.out_buf + 2 * kGuard + off * elem_size(type); }
  const char* in(ArShared& s) const { return in_place ? out(s) : s.in_buf + 2 * kGuard + off * elem_size(type); }
  std::string what(uint64_t seed) const {
    std::ostringstream os;
    os << ferry::algorithm_name(algo) << " " << ferry::dtype_name(type) << " " << ferry::reduce_op_name(op) << " count "
       << count << " offset " << off << (in_place ? " in-place" : "") << " seed " << seed << " (rank " << mpi_rank()
       << " of " << mpi_size() << ")";
    return os.str();
  }
};

// One checked call on fresh inputs: poisoned guards around the output, the
// reference, unchanged input, bitwise identical outputs on every rank.
// Collective. Returns false on every rank if any rank threw.
bool checked_call(ArShared& s, const ArCall& call, uint64_t seed, Summary& sum) {
  const AllReduceAlgorithm runs = call.algo == AllReduceAlgorithm::kAuto ? s.ar->select(call.bytes()) : call.algo;
  const int node_partials = runs == AllReduceAlgorithm::kHierarchical ? s.comm->topology().num_nodes : 0;
  const HostCase hc = make_case(call.type, call.op, call.count, seed, mpi_rank(), mpi_size(), node_partials);
  const std::string what = call.what(seed);
  std::vector<uint8_t> region(call.bytes() + 2 * kGuard), in_after(call.in_place ? 0 : call.bytes());
  std::string error;
  try {
    char* out = call.out(s);
    CK(cudaMemsetAsync(out - kGuard, 0xFF, region.size(), s.stream));
    CK(cudaMemcpyAsync(const_cast<char*>(call.in(s)), hc.input.data(), call.bytes(), cudaMemcpyHostToDevice, s.stream));
    s.ar->run(call.in(s), out, call.count, call.type, call.op, s.stream, call.algo);
    CK(cudaMemcpyAsync(region.data(), out - kGuard, region.size(), cudaMemcpyDeviceToHost, s.stream));
    if (!call.in_place)
      CK(cudaMemcpyAsync(in_after.data(), call.in(s), call.bytes(), cudaMemcpyDeviceToHost, s.stream));
    s.comm->synchronize(s.stream);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_TRUE(error.empty()) << "threw: " << error << "\n  " << what;
  if (!all_ranks(error.empty())) return false;
  const uint8_t* got = region.data() + kGuard;
  const size_t sz = elem_size(call.type);
  size_t bad = 0, bad_guard = 0;
  std::ostringstream first;
  for (size_t i = 0; i < kGuard; ++i) bad_guard += (region[i] != 0xFF) + (got[call.bytes() + i] != 0xFF);
  for (size_t i = 0; i < call.count; ++i) {
    bool ok;
    if (is_int(call.type)) {
      const int64_t v = load_int(call.type, got + i * sz);
      ok = v == hc.iref[i];
      if (!ok && bad < 5) first << "\n  [" << i << "] got " << v << " want " << hc.iref[i];
    } else {
      const double v = load_float(call.type, got + i * sz);
      ok = std::fabs(v - hc.ref[i]) <= hc.tol[i];  // false for NaN (the poison)
      if (!ok && bad < 5) first << "\n  [" << i << "] got " << v << " want " << hc.ref[i] << " +- " << hc.tol[i];
    }
    bad += !ok;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << call.count << " elements wrong: " << what << first.str();
  EXPECT_EQ(bad_guard, 0u) << "wrote outside the output: " << what;
  EXPECT_TRUE(call.in_place || in_after == hc.input) << "input modified: " << what;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < call.bytes(); ++i) hash = (hash ^ got[i]) * 0x100000001b3ull;
  std::vector<uint64_t> hashes(static_cast<size_t>(mpi_size()));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  size_t differ = 0;
  for (int r = 0; r < mpi_size(); ++r) {
    EXPECT_EQ(hashes[r], hash) << "rank " << r << " differs bitwise: " << what;
    differ += hashes[r] != hash;
  }
  ++sum.checks;
  sum.failed_checks += bad || bad_guard || differ || (!call.in_place && in_after != hc.input);
  return true;
}

TEST(Soak, AllReduce) {
  FERRY_REQUIRE_GPUS();
  ArShared& s = ar_shared();
  const long calls = env_long("FERRY_SOAK_AR_CALLS", 10000);
  std::vector<AllReduceAlgorithm> algos;
  for (int a = 0; a <= static_cast<int>(AllReduceAlgorithm::kHierarchical); ++a)
    if (s.ar->supports(static_cast<AllReduceAlgorithm>(a))) algos.push_back(static_cast<AllReduceAlgorithm>(a));
  ASSERT_FALSE(algos.empty());
  ep::Rng rng(s.seed);  // the same draws on every rank
  auto draw = [&](AllReduceAlgorithm algo, DataType t, ReduceOp op) {
    const size_t max_count = s.max_bytes / elem_size(t);
    size_t count = static_cast<size_t>(std::exp(rng.uniform() * std::log(static_cast<double>(max_count) + 1.0)));
    if (rng.below(50) == 0) count = max_count;
    count = std::clamp<size_t>(count, 1, max_count);
    const size_t off = rng.below(3) == 0 ? 1 + rng.below(3) : 0;
    return ArCall{algo, t, op, count, off, rng.below(5) == 0};
  };
  Summary sum;
  sum.what = "allreduce";
  // Warm-up: every supported algorithm x type x op once, checked (loads every
  // kernel before the baseline), and the largest call of each type (the host
  // reference's largest buffers, so that the baseline holds them).
  bool alive = true;
  for (AllReduceAlgorithm a : algos)
    for (DataType t : kTypes)
      for (ReduceOp op : kOps) {
        ArCall call = draw(a, t, op);
        call.count = std::min<size_t>(call.count, 70000);
        alive = alive && checked_call(s, call, rng.next(), sum);
      }
  for (DataType t : kTypes)
    alive = alive && checked_call(s, ArCall{AllReduceAlgorithm::kAuto, t, ReduceOp::kSum, s.max_bytes / elem_size(t), 0,
                                            false}, rng.next(), sum);
  ASSERT_TRUE(alive);
  ASSERT_TRUE(all_ranks(sum.failed_checks == 0)) << "failed checks in the warm-up sweep";
  const long warm_checks = sum.checks;
  measure_progress(sum, 0, 0, calls, s.stream);
  sum.checks = 0;
  sum.start = Clock::now();
  std::string error;
  for (long c = 0; alive && c < calls; ++c) {
    const AllReduceAlgorithm algo = algos[rng.below(static_cast<int>(algos.size()))];
    const DataType type = kTypes[rng.below(static_cast<int>(std::size(kTypes)))];
    const ArCall call = draw(algo, type, kOps[rng.below(static_cast<int>(std::size(kOps)))]);
    if (is_check(c, calls)) {
      if (!all_ranks(error.empty())) break;
      alive = checked_call(s, call, rng.next(), sum);
      if (!all_ranks(sum.failed_checks < kMaxFailedChecks)) break;
    } else if (error.empty()) {
      try {  // on whatever the buffers hold: no upload, no host synchronization
        s.ar->run(call.in(s), call.out(s), call.count, call.type, call.op, s.stream, call.algo);
      } catch (const std::exception& e) {
        error = e.what() + std::string(" (call ") + std::to_string(c) + ")";
      }
    }
    sum.calls += alive && error.empty();
    progress(sum, c, calls);
    if (alive && c + 1 < calls) measure_progress(sum, c + 1, 0, calls, s.stream);
  }
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(alive);
  EXPECT_EQ(sum.calls, calls);
  EXPECT_EQ(sum.failed_checks, 0) << sum.what;
  if (mpi_rank() == 0) std::printf("[soak] allreduce: warm-up sweep of %ld checked calls passed\n", warm_checks);
  finish(sum, s.stream);
}

}  // namespace
