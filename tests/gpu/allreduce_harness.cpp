// Definitions of the AllReduce test harness (allreduce_harness.hpp): the one
// Shared of the program and its teardown, and one call staged, run and checked.
#include "gpu/allreduce_harness.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/allreduce_reference.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/types.hpp"

namespace ferry::testing::ar_gpu {

namespace {

// ---------------------------------------------------------------- shared state
std::unique_ptr<Shared>& shared_slot() {
  static std::unique_ptr<Shared> s;
  return s;
}
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new ferry::testing::TearDownEnvironment([] { shared_slot().reset(); }));

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
}  // namespace

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

const char* algo_id(AllReduceAlgorithm a) {
  return std::array{"auto", "one_shot", "two_shot", "ring", "recursive_doubling", "hierarchical"}[static_cast<int>(a)];
}
const char* type_id(DataType t) { return std::array{"f32", "f64", "i32", "i64", "bf16", "f16"}[static_cast<int>(t)]; }
const char* op_id(ReduceOp op) { return std::array{"sum", "prod", "min", "max", "avg"}[static_cast<int>(op)]; }

bool spans_nodes(Shared& s) { return s.comm->topology().num_nodes > 1; }

// ---------------------------------------------------------------- one call, staged and checked
std::string Job::what() const {
  std::ostringstream os;
  os << algo_id(algo) << " " << type_id(type) << " " << op_id(op) << " count " << count << " in "
     << in << " out " << out << (in_place() ? " in-place" : "") << " seed " << seed << " (rank "
     << mpi_rank() << " of " << mpi_size() << ")";
  return os.str();
}

Job make_job(Shared& s, AllReduceAlgorithm algo, DataType t, ReduceOp op, size_t count, const void* in,
             void* out, size_t guard) {
  Job j{algo, t, op, count, in, out, guard, s.next_seed(), {}, {}, {}};
  const AllReduceAlgorithm runs = algo == AllReduceAlgorithm::kAuto ? s.ar->select(j.bytes()) : algo;
  const int node_partials = runs == AllReduceAlgorithm::kHierarchical ? s.comm->topology().num_nodes : 0;
  j.hc = make_case(t, op, count, j.seed, mpi_rank(), mpi_size(), node_partials);
  return j;
}
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

bool check_call(Shared& s, AllReduceAlgorithm algo, DataType t, ReduceOp op, size_t count, size_t in_off,
                size_t out_off, bool in_place) {
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

}  // namespace ferry::testing::ar_gpu
