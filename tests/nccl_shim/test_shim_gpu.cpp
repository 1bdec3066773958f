// GPU tier of libferry_nccl.so (issue 25): a program written against nccl.h
// (plus the shim's own ferry_nccl_ext.h, the CUDA runtime, and MPI only to hand
// out the ncclUniqueId and to agree on the outcome), linked to the shim, one
// process per GPU. Every result is checked against a host reference of fresh
// random inputs (shim_gpu_util.hpp); every ncclAllReduce's route (ferry or the
// real NCCL) is checked against the shim's policy through ferryNcclShimStats.
// ctest runs it twice: with the shim on, and with FERRY_NCCL_SHIM=off (the same
// checks, every call on NCCL). Without one GPU per rank on each node it prints
// "FERRY NCCL SHIM GPU TESTS SKIPPED" and passes: the real NCCL refuses two
// ranks on one GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ferry_nccl_ext.h"
#include "shim_gpu_util.hpp"

namespace {
using namespace shim_test;

constexpr const char* kSkipped = "FERRY NCCL SHIM GPU TESTS SKIPPED";

struct World {
  int rank = 0, size = 1, device = -1;
  uint64_t seed = 0;
  bool shim_off = false;   // FERRY_NCCL_SHIM=off
  std::string skip;        // why the tests cannot run here ("" when they can)
  std::string init_error;  // ncclCommInitRank's failure
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // non-blocking, not the default stream
  size_t limit = size_t{64} << 20;  // the largest call ferry takes (FERRY_NCCL_SHIM_MAX_BYTES)
};
World g;

#define CUDA_OK(x)                                                                      \
  do {                                                                                  \
    const cudaError_t e_ = (x);                                                         \
    ASSERT_EQ(e_, cudaSuccess) << #x << ": " << cudaGetErrorString(e_);                 \
  } while (0)
#define NCCL_OK(x, comm)                                                                \
  do {                                                                                  \
    const ncclResult_t r_ = (x);                                                        \
    ASSERT_EQ(r_, ncclSuccess) << #x << ": " << ncclGetErrorString(r_) << " ("          \
                               << ncclGetLastError(comm) << ")";                        \
  } while (0)

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

ferryNcclShimStats_t stats(ncclComm_t comm) {
  ferryNcclShimStats_t s{};
  EXPECT_EQ(ferryNcclShimStats(comm, &s), ncclSuccess) << ncclGetLastError(comm);
  return s;
}

// The shim's policy (docs/nccl-shim.md): ferry takes an ungrouped ncclAllReduce
// of fp32/fp16/bf16 with a built-in op, 1..max_bytes bytes, on a communicator it serves.
bool expect_ferry(const ferryNcclShimStats_t& s, ncclDataType_t t, ncclRedOp_t op, size_t count) {
  return s.ferry_serves != 0 && ferry_type(t) && ferry_op(op) && count > 0;  // larger than max_bytes: in pieces
}

std::string label(ncclDataType_t t, ncclRedOp_t op, size_t count, bool in_place) {
  return std::string(type_name(t)) + " " + op_name(op) + " count " + std::to_string(count) +
         (in_place ? " in place" : " out of place");
}

// One ncclAllReduce of fresh inputs (tag) on `stream`: `a` holds the input,
// `b` the output (poisoned first) unless in place; result and route checked.
void allreduce_case(ncclComm_t comm, ncclDataType_t t, ncclRedOp_t op, size_t count, bool in_place, uint64_t tag,
                    cudaStream_t stream, void* a, void* b) {
  const size_t bytes = count * type_size(t);
  const std::string what = label(t, op, count, in_place);
  const std::vector<uint8_t> input = make_input(t, count, g.seed, g.rank, tag, op);
  void* out = in_place ? a : b;
  CUDA_OK(cudaMemcpyAsync(a, input.data(), bytes, cudaMemcpyHostToDevice, stream));
  if (!in_place) CUDA_OK(cudaMemsetAsync(out, poison_byte(t), bytes, stream));
  const ferryNcclShimStats_t before = stats(comm);
  NCCL_OK(ncclAllReduce(a, out, count, t, op, comm, stream), comm);
  std::vector<uint8_t> got(bytes);
  CUDA_OK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const ferryNcclShimStats_t after = stats(comm);
  const bool ferry = expect_ferry(before, t, op, count);
  EXPECT_EQ(after.allreduce_ferry - before.allreduce_ferry, ferry ? 1u : 0u) << what << ": route";
  EXPECT_EQ(after.allreduce_forwarded - before.allreduce_forwarded, ferry ? 0u : 1u) << what << ": route";
  const std::string bad = check(t, op, g.size, g.seed, tag, got, count);
  EXPECT_TRUE(bad.empty()) << what << ": " << bad;
}

class ShimGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g.skip.empty()) GTEST_SKIP() << kSkipped << ": " << g.skip;
    ASSERT_NE(g.comm, nullptr) << "ncclCommInitRank failed: " << g.init_error;
  }
};

const ncclDataType_t kTypes[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32, ncclInt64, ncclFloat64, ncclInt8};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};

// Every op x type (ferry's and those it lacks) at small and odd sizes, in and
// out of place, on a non-default stream.
TEST_F(ShimGpu, EveryOpTypeAndSmallSize) {
  DeviceBuffer a(8u << 20), b(8u << 20);
  ASSERT_TRUE(a.ptr && b.ptr);
  uint64_t tag = 1000;
  for (ncclDataType_t t : kTypes) {
    const size_t e = type_size(t);
    for (ncclRedOp_t op : kOps) {
      for (size_t count : {size_t{1}, size_t{1003}, 4096 / e, 65536 / e + 1, size_t{1000003}}) {
        for (bool in_place : {false, true}) {
          allreduce_case(g.comm, t, op, count, in_place, ++tag, g.stream, a.ptr, b.ptr);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// 1 MiB .. FERRY_NCCL_SHIM_MAX_BYTES (ferry's AllReduce's max_bytes), one element
// more and twice it plus an odd count (ferry, in pieces of max_bytes), in and
// out of place.
TEST_F(ShimGpu, LargeSizesUpToAndPastTheLimit) {
  DeviceBuffer a(2 * g.limit + 16384), b(2 * g.limit + 16384);  // 2 x limit + 1001 elements of 8 bytes
  ASSERT_TRUE(a.ptr && b.ptr);
  uint64_t tag = 5000;
  for (ncclDataType_t t : {ncclFloat32, ncclBfloat16, ncclFloat16, ncclFloat64, ncclInt32, ncclInt64}) {
    const size_t e = type_size(t);
    for (size_t count : {(size_t{1} << 20) / e, (size_t{16} << 20) / e + 3, g.limit / e, g.limit / e + 1,
                         2 * g.limit / e + 1001}) {
      allreduce_case(g.comm, t, ncclSum, count, false, ++tag, g.stream, a.ptr, b.ptr);
      if (HasFatalFailure()) return;
    }
    allreduce_case(g.comm, t, ncclMax, (size_t{16} << 20) / e, true, ++tag, g.stream, a.ptr, b.ptr);
    allreduce_case(g.comm, t, ncclMin, g.limit / e + 3, true, ++tag, g.stream, a.ptr, b.ptr);
    if (HasFatalFailure()) return;
  }
  allreduce_case(g.comm, ncclInt8, ncclSum, size_t{16} << 20, false, ++tag, g.stream, a.ptr, b.ptr);  // forwarded
}

// The legacy default stream (stream 0) works too.
TEST_F(ShimGpu, DefaultStream) {
  DeviceBuffer a(1u << 20), b(1u << 20);
  ASSERT_TRUE(a.ptr && b.ptr);
  allreduce_case(g.comm, ncclBfloat16, ncclSum, 100003, false, 7000, nullptr, a.ptr, b.ptr);
  allreduce_case(g.comm, ncclFloat32, ncclMin, 4097, true, 7001, nullptr, a.ptr, b.ptr);
}

// Calls captured into one CUDA graph (ferry's and forwarded ones mixed), the
// graph replayed with new inputs and poisoned outputs each time.
TEST_F(ShimGpu, CudaGraphCaptureAndReplay) {
  struct Call {
    ncclDataType_t t;
    ncclRedOp_t op;
    size_t count;
    bool in_place;
  };
  const std::vector<Call> calls = {{ncclFloat32, ncclSum, 262147, false}, {ncclBfloat16, ncclMax, 4099, true},
                                   {ncclFloat16, ncclAvg, 65537, false},  {ncclInt8, ncclSum, 1001, false},
                                   {ncclFloat32, ncclProd, 1, false},     {ncclBfloat16, ncclSum, 1 << 20, true}};
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  for (const Call& c : calls) {
    in.push_back(std::make_unique<DeviceBuffer>(c.count * type_size(c.t)));
    out.push_back(std::make_unique<DeviceBuffer>(c.count * type_size(c.t)));
    ASSERT_TRUE(in.back()->ptr && out.back()->ptr);
  }
  const ferryNcclShimStats_t before = stats(g.comm);
  unsigned expected_ferry = 0;
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    expected_ferry += expect_ferry(before, c.t, c.op, c.count) ? 1 : 0;
    const ncclResult_t res = ncclAllReduce(in[i]->ptr, c.in_place ? in[i]->ptr : out[i]->ptr, c.count, c.t, c.op,
                                           g.comm, g.stream);
    EXPECT_EQ(res, ncclSuccess) << "captured " << label(c.t, c.op, c.count, c.in_place) << ": "
                                << ncclGetLastError(g.comm);
  }
  CUDA_OK(cudaStreamEndCapture(g.stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  const ferryNcclShimStats_t captured = stats(g.comm);
  EXPECT_EQ(captured.allreduce_ferry - before.allreduce_ferry, expected_ferry);
  EXPECT_EQ(captured.allreduce_forwarded - before.allreduce_forwarded, calls.size() - expected_ferry);
  for (int replay = 0; replay < 4; ++replay) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      const std::vector<uint8_t> input = make_input(c.t, c.count, g.seed, g.rank, 8000 + replay * 16 + i, c.op);
      CUDA_OK(cudaMemcpyAsync(in[i]->ptr, input.data(), input.size(), cudaMemcpyHostToDevice, g.stream));
      if (!c.in_place) CUDA_OK(cudaMemsetAsync(out[i]->ptr, poison_byte(c.t), input.size(), g.stream));
    }
    CUDA_OK(cudaStreamSynchronize(g.stream));  // the inputs are pageable: done before they go out of scope
    CUDA_OK(cudaGraphLaunch(exec, g.stream));
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      std::vector<uint8_t> got(c.count * type_size(c.t));
      CUDA_OK(cudaMemcpyAsync(got.data(), c.in_place ? in[i]->ptr : out[i]->ptr, got.size(), cudaMemcpyDeviceToHost,
                              g.stream));
      CUDA_OK(cudaStreamSynchronize(g.stream));
      const std::string bad = check(c.t, c.op, g.size, g.seed, 8000 + replay * 16 + i, got, c.count);
      EXPECT_TRUE(bad.empty()) << "replay " << replay << ", " << label(c.t, c.op, c.count, c.in_place) << ": " << bad;
    }
  }
  const ferryNcclShimStats_t replayed = stats(g.comm);  // replays make no host calls
  EXPECT_EQ(replayed.allreduce_ferry, captured.allreduce_ferry);
  EXPECT_EQ(replayed.allreduce_forwarded, captured.allreduce_forwarded);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Calls ferry does not take reach NCCL and come back right: ncclAllGather, two
// ncclAllReduce calls in one group, a ncclRedOpCreatePreMulSum op.
TEST_F(ShimGpu, ForwardedCalls) {
  const size_t n = 1001;
  DeviceBuffer send(n * 4), recv(n * 4 * g.size);
  ASSERT_TRUE(send.ptr && recv.ptr);
  const std::vector<uint8_t> mine = make_input(ncclFloat32, n, g.seed, g.rank, 9000, ncclSum);
  CUDA_OK(cudaMemcpyAsync(send.ptr, mine.data(), mine.size(), cudaMemcpyHostToDevice, g.stream));
  CUDA_OK(cudaMemsetAsync(recv.ptr, 0xff, n * 4 * g.size, g.stream));
  NCCL_OK(ncclAllGather(send.ptr, recv.ptr, n, ncclFloat32, g.comm, g.stream), g.comm);
  std::vector<uint8_t> all(n * 4 * g.size);
  CUDA_OK(cudaMemcpyAsync(all.data(), recv.ptr, all.size(), cudaMemcpyDeviceToHost, g.stream));
  CUDA_OK(cudaStreamSynchronize(g.stream));
  for (int r = 0; r < g.size; ++r) {
    const std::vector<uint8_t> theirs = make_input(ncclFloat32, n, g.seed, r, 9000, ncclSum);
    EXPECT_EQ(std::memcmp(all.data() + r * n * 4, theirs.data(), n * 4), 0) << "ncclAllGather: rank " << r << "'s part";
  }

  // A group of two allreduces: NCCL runs both (the shim cannot join NCCL's group).
  const size_t n1 = 5003, n2 = 777;
  DeviceBuffer a1(n1 * 4), b1(n1 * 4), a2(n2 * 2), b2(n2 * 2);
  const std::vector<uint8_t> in1 = make_input(ncclFloat32, n1, g.seed, g.rank, 9001, ncclSum);
  const std::vector<uint8_t> in2 = make_input(ncclBfloat16, n2, g.seed, g.rank, 9002, ncclMax);
  CUDA_OK(cudaMemcpyAsync(a1.ptr, in1.data(), in1.size(), cudaMemcpyHostToDevice, g.stream));
  CUDA_OK(cudaMemcpyAsync(a2.ptr, in2.data(), in2.size(), cudaMemcpyHostToDevice, g.stream));
  CUDA_OK(cudaMemsetAsync(b1.ptr, 0xff, in1.size(), g.stream));
  CUDA_OK(cudaMemsetAsync(b2.ptr, 0xff, in2.size(), g.stream));
  const ferryNcclShimStats_t before = stats(g.comm);
  NCCL_OK(ncclGroupStart(), g.comm);
  NCCL_OK(ncclAllReduce(a1.ptr, b1.ptr, n1, ncclFloat32, ncclSum, g.comm, g.stream), g.comm);
  NCCL_OK(ncclAllReduce(a2.ptr, b2.ptr, n2, ncclBfloat16, ncclMax, g.comm, g.stream), g.comm);
  NCCL_OK(ncclGroupEnd(), g.comm);
  std::vector<uint8_t> got1(in1.size()), got2(in2.size());
  CUDA_OK(cudaMemcpyAsync(got1.data(), b1.ptr, got1.size(), cudaMemcpyDeviceToHost, g.stream));
  CUDA_OK(cudaMemcpyAsync(got2.data(), b2.ptr, got2.size(), cudaMemcpyDeviceToHost, g.stream));
  CUDA_OK(cudaStreamSynchronize(g.stream));
  const ferryNcclShimStats_t after = stats(g.comm);
  EXPECT_EQ(after.allreduce_ferry, before.allreduce_ferry) << "grouped calls must go to NCCL";
  EXPECT_EQ(after.allreduce_forwarded - before.allreduce_forwarded, 2u);
  EXPECT_EQ(check(ncclFloat32, ncclSum, g.size, g.seed, 9001, got1, n1), "") << "grouped fp32 sum";
  EXPECT_EQ(check(ncclBfloat16, ncclMax, g.size, g.seed, 9002, got2, n2), "") << "grouped bf16 max";

  // sum of 0.5 * x: an op ferry lacks.
  float scalar = 0.5f;
  ncclRedOp_t premul;
  NCCL_OK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate, g.comm), g.comm);
  CUDA_OK(cudaMemsetAsync(b1.ptr, 0xff, in1.size(), g.stream));
  NCCL_OK(ncclAllReduce(a1.ptr, b1.ptr, n1, ncclFloat32, premul, g.comm, g.stream), g.comm);
  CUDA_OK(cudaMemcpyAsync(got1.data(), b1.ptr, got1.size(), cudaMemcpyDeviceToHost, g.stream));
  CUDA_OK(cudaStreamSynchronize(g.stream));
  EXPECT_EQ(stats(g.comm).allreduce_forwarded - after.allreduce_forwarded, 1u) << "a PreMulSum op must go to NCCL";
  EXPECT_EQ(check(ncclFloat32, ncclSum, g.size, g.seed, 9001, got1, n1, 0.5), "") << "PreMulSum 0.5";
  NCCL_OK(ncclRedOpDestroy(premul, g.comm), g.comm);
}

// User buffers from ncclMemAlloc, registered with ncclCommRegister: ferry reads
// them like any device pointer (docs/nccl-shim.md), NCCL through its registration.
TEST_F(ShimGpu, RegisteredBuffers) {
  const size_t bytes = size_t{4} << 20;
  void* a = nullptr;
  void* b = nullptr;
  NCCL_OK(ncclMemAlloc(&a, bytes), g.comm);
  NCCL_OK(ncclMemAlloc(&b, bytes), g.comm);
  void* ha = nullptr;
  void* hb = nullptr;
  NCCL_OK(ncclCommRegister(g.comm, a, bytes, &ha), g.comm);
  NCCL_OK(ncclCommRegister(g.comm, b, bytes, &hb), g.comm);
  allreduce_case(g.comm, ncclBfloat16, ncclSum, bytes / 2, false, 9100, g.stream, a, b);
  allreduce_case(g.comm, ncclFloat32, ncclMax, bytes / 4 - 5, true, 9101, g.stream, a, b);
  allreduce_case(g.comm, ncclInt64, ncclSum, bytes / 8 - 1, true, 9102, g.stream, a, b);
  allreduce_case(g.comm, ncclInt8, ncclSum, bytes, false, 9103, g.stream, a, b);  // forwarded
  EXPECT_EQ(ncclCommDeregister(g.comm, ha), ncclSuccess) << ncclGetLastError(g.comm);
  EXPECT_EQ(ncclCommDeregister(g.comm, hb), ncclSuccess) << ncclGetLastError(g.comm);
  EXPECT_EQ(ncclMemFree(a), ncclSuccess);
  EXPECT_EQ(ncclMemFree(b), ncclSuccess);
}

// A communicator from ncclCommSplit (ranks reversed) works, on ferry when the shim is on.
TEST_F(ShimGpu, SplitCommunicator) {
  ncclComm_t sub = nullptr;
  NCCL_OK(ncclCommSplit(g.comm, 0, g.size - 1 - g.rank, &sub, nullptr), g.comm);
  ASSERT_NE(sub, nullptr);
  int rank = -1, count = 0;
  EXPECT_EQ(ncclCommUserRank(sub, &rank), ncclSuccess);
  EXPECT_EQ(ncclCommCount(sub, &count), ncclSuccess);
  EXPECT_EQ(rank, g.size - 1 - g.rank);
  EXPECT_EQ(count, g.size);
  const ferryNcclShimStats_t s = stats(sub);
  EXPECT_EQ(s.ferry_serves, g.shim_off ? 0 : 1) << "split communicator: " << s.no_ferry;
  DeviceBuffer a(1u << 20), b(1u << 20);
  allreduce_case(sub, ncclFloat32, ncclSum, 40009, false, 9200, g.stream, a.ptr, b.ptr);
  allreduce_case(sub, ncclBfloat16, ncclAvg, 333, true, 9201, g.stream, a.ptr, b.ptr);
  EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
}

// A communicator made between ncclGroupStart and ncclGroupEnd, as nccl-tests
// makes its own: ferry is set up at the group's end (NOTE [Communicators made
// inside a group], nccl_shim/shim_comm.hpp).
TEST_F(ShimGpu, CommunicatorMadeInsideAGroup) {
  ncclUniqueId id{};
  if (g.rank == 0) NCCL_OK(ncclGetUniqueId(&id), g.comm);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NCCL_OK(ncclGroupStart(), g.comm);
  NCCL_OK(ncclCommInitRankConfig(&comm, g.size, id, g.rank, &config), g.comm);
  NCCL_OK(ncclGroupEnd(), g.comm);
  ASSERT_NE(comm, nullptr);
  const ferryNcclShimStats_t s = stats(comm);
  EXPECT_EQ(s.ferry_serves, g.shim_off ? 0 : 1) << "communicator made in a group: " << s.no_ferry;
  DeviceBuffer a(1u << 20), b(1u << 20);
  allreduce_case(comm, ncclBfloat16, ncclSum, 65537, false, 9300, g.stream, a.ptr, b.ptr);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Bad use: NCCL's codes and a ncclGetLastError text, never a crash. A
// mismatch of count or datatype between ranks is not checked: NCCL does not
// detect it either (it hangs or reads past a buffer), and the shim forwards
// with NCCL's semantics; what is checked is an invalid datatype or op and a
// count of 0, which the shim hands to NCCL unchanged.
TEST_F(ShimGpu, BadUse) {
  DeviceBuffer a(4096), b(4096);
  EXPECT_EQ(ncclAllReduce(a.ptr, b.ptr, 16, ncclFloat32, ncclSum, nullptr, g.stream), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)), "");
  int n = 0;
  EXPECT_EQ(ncclCommCount(nullptr, &n), ncclInvalidArgument);

  // A communicator of its own, so an error NCCL records cannot touch g.comm.
  ncclComm_t sub = nullptr;
  NCCL_OK(ncclCommSplit(g.comm, 0, g.rank, &sub, nullptr), g.comm);
  EXPECT_EQ(ncclAllReduce(a.ptr, b.ptr, 16, static_cast<ncclDataType_t>(ncclNumTypes + 3), ncclSum, sub, g.stream),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(sub)), "");
  EXPECT_EQ(ncclAllReduce(a.ptr, b.ptr, 16, ncclFloat32, static_cast<ncclRedOp_t>(1234), sub, g.stream),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(sub)), "");
  EXPECT_EQ(ncclAllReduce(a.ptr, b.ptr, 0, ncclFloat32, ncclSum, sub, g.stream), ncclSuccess);  // nothing to do
  EXPECT_EQ(cudaStreamSynchronize(g.stream), cudaSuccess);

  // Destroyed, then used.
  ASSERT_EQ(ncclCommDestroy(sub), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(a.ptr, b.ptr, 16, ncclFloat32, ncclSum, sub, g.stream), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(sub)).find("not a live communicator"), std::string::npos)
      << ncclGetLastError(sub);
  EXPECT_EQ(ncclAllGather(a.ptr, b.ptr, 4, ncclFloat32, sub, g.stream), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(sub), ncclInvalidArgument);
  ferryNcclShimStats_t s{};
  EXPECT_EQ(ferryNcclShimStats(sub, &s), ncclInvalidArgument);
  EXPECT_EQ(cudaStreamSynchronize(g.stream), cudaSuccess);
}

// Last: ferry took calls with the shim on, none with it off.
TEST_F(ShimGpu, RoutesMatchTheMode) {
  const ferryNcclShimStats_t s = stats(g.comm);
  if (g.rank == 0)
    std::printf("[shim] FERRY_NCCL_SHIM=%s: ferry ran %llu ncclAllReduce calls, NCCL %llu%s%s\n",
                g.shim_off ? "off" : "on", s.allreduce_ferry, s.allreduce_forwarded, s.ferry_serves ? "" : "; ",
                s.no_ferry);
  EXPECT_GT(s.allreduce_forwarded, 0u);
  if (g.shim_off) {
    EXPECT_EQ(s.ferry_serves, 0);
    EXPECT_EQ(s.allreduce_ferry, 0u);
  } else {
    EXPECT_EQ(s.ferry_serves, 1) << "ferry does not serve the communicator: " << s.no_ferry;
    EXPECT_GT(s.allreduce_ferry, 0u);
  }
}

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

// One GPU per rank on every node, or the reason why not.
std::string gpu_check(int* device) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  cudaGetLastError();
  const int enough = count >= local_size ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&enough, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  *device = count > 0 ? local_rank % count : -1;
  if (all) return "";
  return std::to_string(count) + " GPU(s) for " + std::to_string(local_size) +
         " ranks on a node; the real NCCL refuses two ranks on one GPU";
}

void set_up() {
  const char* mode = std::getenv("FERRY_NCCL_SHIM");
  g.shim_off = mode != nullptr && std::string(mode) == "off";
  g.skip = gpu_check(&g.device);
  if (!g.skip.empty()) {
    if (g.rank == 0) std::printf("*** %s: %s ***\n", kSkipped, g.skip.c_str());
    return;
  }
  cudaSetDevice(g.device);
  if (g.rank == 0) {
    const char* env = std::getenv("FERRY_TEST_SEED");
    g.seed = env ? std::strtoull(env, nullptr, 0) : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  MPI_Bcast(&g.seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  ncclUniqueId id{};
  ncclResult_t res = g.rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (res == ncclSuccess) res = ncclCommInitRank(&g.comm, g.size, id, g.rank);
  if (res != ncclSuccess) {
    g.init_error = std::string(ncclGetErrorString(res)) + " (" + ncclGetLastError(nullptr) + ")";
    g.comm = nullptr;
    return;
  }
  cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking);
  ferryNcclShimStats_t s{};
  ferryNcclShimStats(g.comm, &s);
  if (s.ferry_serves) g.limit = s.max_bytes;
  else if (const char* m = std::getenv("FERRY_NCCL_SHIM_MAX_BYTES"); m && std::strspn(m, "0123456789") == std::strlen(m) && *m)
    g.limit = std::strtoull(m, nullptr, 10);
  int version = 0;
  ncclGetVersion(&version);
  if (g.rank == 0)
    std::printf("[shim] %d ranks, NCCL %d, FERRY_NCCL_SHIM=%s, ferry %s%s, limit %zu bytes, seed %llu "
                "(FERRY_TEST_SEED repeats it)\n",
                g.size, version, g.shim_off ? "off" : "on", s.ferry_serves ? "serves the communicator" : "does not: ",
                s.ferry_serves ? "" : s.no_ferry, g.limit, static_cast<unsigned long long>(g.seed));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g.size);
  if (g.rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(g.rank));
  }
  set_up();
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (g.comm != nullptr) ncclCommDestroy(g.comm);
  if (g.stream != nullptr) cudaStreamDestroy(g.stream);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g.rank == 0) std::printf("[shim] %s on all ranks\n", any ? "FAILED" : "PASSED");
  MPI_Finalize();
  return any;
}
