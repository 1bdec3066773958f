// The cases of test_killed_peer.cpp and what one rank drives in them: an
// AllReduce, or an EpBuffer with its inputs.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"

namespace ferry::testing::killed_peer {

using ferry::AllReduceAlgorithm;
using ferry::DataType;
using ferry::EpMode;
using ferry::TensorView;

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// ---------------------------------------------------------------- cases
enum class Op { kAllReduce, kDispatch, kCombine };
enum class When { kBefore, kMid };

struct Case {
  std::string name;
  int world = 2;
  int per_node = 0;  // FERRY_RANKS_PER_NODE; 0: one node
  Op op = Op::kAllReduce;
  AllReduceAlgorithm algo = AllReduceAlgorithm::kAuto;
  size_t bytes = 0;  // AllReduce
  EpMode mode = EpMode::kHighThroughput;
  When when = When::kMid;
  int victim = 1;
};

inline Case allreduce_case(int world, int per_node, AllReduceAlgorithm algo, size_t bytes, When when, int victim) {
  Case c;
  c.world = world, c.per_node = per_node, c.op = Op::kAllReduce, c.algo = algo, c.bytes = bytes, c.when = when;
  c.victim = victim;
  c.name = "ar_" + std::string(ferry::algorithm_name(algo)) + "_" + std::to_string(bytes >> 10) + "K_w" +
           std::to_string(world) + (per_node ? "x" + std::to_string(per_node) : "") +
           (when == When::kMid ? "_mid_v" : "_before_v") + std::to_string(victim);
  return c;
}

inline Case ep_case(int world, int per_node, EpMode mode, Op op, When when, int victim) {
  Case c;
  c.world = world, c.per_node = per_node, c.op = op, c.mode = mode, c.when = when, c.victim = victim;
  c.name = std::string(mode == EpMode::kHighThroughput ? "ep_ht_" : "ep_ll_") +
           (op == Op::kDispatch ? "dispatch" : "combine") + "_w" + std::to_string(world) +
           (per_node ? "x" + std::to_string(per_node) : "") + (when == When::kMid ? "_mid_v" : "_before_v") +
           std::to_string(victim);
  return c;
}

// Phase names (include/ferry/device/timeout.cuh) the error may carry for a call.
inline bool phase_fits(const Case& c, Op failed_in, const std::string& phase) {
  if (phase.empty()) return false;
  if (c.per_node > 0) {  // the wait may be on the proxy, or UCX may report the dead peer first
    for (const char* p : {"proxy transfer", "proxy quiet", "proxy fifo full", "wait_signal"})
      if (phase == p) return true;
  }
  if (failed_in == Op::kDispatch) return phase == "ep dispatch";
  if (failed_in == Op::kCombine) return phase == "ep combine";
  switch (c.algo) {
    case AllReduceAlgorithm::kOneShot: return starts_with(phase, "allreduce one-shot");
    case AllReduceAlgorithm::kTwoShot: return starts_with(phase, "allreduce two-shot");
    case AllReduceAlgorithm::kRing: return starts_with(phase, "allreduce ring");
    case AllReduceAlgorithm::kRecursiveDoubling: return starts_with(phase, "allreduce recursive doubling");
    case AllReduceAlgorithm::kHierarchical: return starts_with(phase, "allreduce hierarchical");
    default: return starts_with(phase, "allreduce");
  }
}

// ---------------------------------------------------------------- one rank's work
// What a rank drives: an AllReduce, or an EpBuffer with its inputs. Calls
// synchronize through the communicator, so a device error throws here.
struct Work {
  virtual ~Work() = default;
  // One round: AllReduce::run, or dispatch then combine. `before(op)` runs just
  // before each call (the victim dies there; survivors lag there).
  virtual void round(const std::function<void(Op)>& before, bool check) = 0;
};

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct AllReduceWork : Work {
  ferry::Communicator& comm;
  const Case& c;
  cudaStream_t stream;
  std::unique_ptr<ferry::AllReduce> ar;
  float* in = nullptr;
  float* out = nullptr;
  size_t count;

  AllReduceWork(ferry::Communicator& comm_, const Case& c_, cudaStream_t stream_)
      : comm(comm_), c(c_), stream(stream_), count(c_.bytes / sizeof(float)) {
    ar = std::make_unique<ferry::AllReduce>(comm, size_t{1} << 20);
    if (!ar->supports(c.algo))
      throw std::runtime_error(std::string("AllReduce does not support ") + ferry::algorithm_name(c.algo));
    cuda_ok(cudaMalloc(&in, c.bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&out, c.bytes), "cudaMalloc");
    std::vector<float> host(count, static_cast<float>(comm.rank() + 1));
    cuda_ok(cudaMemcpy(in, host.data(), c.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~AllReduceWork() override {
    ar.reset();
    cudaFree(in);
    cudaFree(out);
  }
  void round(const std::function<void(Op)>& before, bool check) override {
    before(Op::kAllReduce);
    ar->run(in, out, count, DataType::kFloat32, ferry::ReduceOp::kSum, stream, c.algo);
    comm.synchronize(stream);
    if (!check) return;
    float got[2] = {};
    cuda_ok(cudaMemcpy(&got[0], out, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cuda_ok(cudaMemcpy(&got[1], out + count - 1, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    const float want = static_cast<float>(c.world * (c.world + 1) / 2);
    if (got[0] != want || got[1] != want)
      throw std::runtime_error("AllReduce gave " + std::to_string(got[0]) + ", " + std::to_string(got[1]) +
                               " instead of " + std::to_string(want));
  }
};

struct EpWork : Work {
  static constexpr int kTokens = 64, kHidden = 512, kTopk = 2;
  ferry::Communicator& comm;
  const Case& c;
  cudaStream_t stream;
  std::unique_ptr<ferry::EpBuffer> buf;
  void* tokens = nullptr;
  int32_t* idx = nullptr;
  float* weights = nullptr;
  void* out = nullptr;
  ferry::DispatchResult result;

  EpWork(ferry::Communicator& comm_, const Case& c_, cudaStream_t stream_) : comm(comm_), c(c_), stream(stream_) {
    ferry::EpConfig config;
    config.max_tokens_per_rank = kTokens;
    config.hidden = kHidden;
    config.topk = kTopk;
    config.num_experts = 4 * c.world;
    config.mode = c.mode;
    buf = std::make_unique<ferry::EpBuffer>(comm, config);
    const size_t token_bytes = size_t{kTokens} * kHidden * 2;
    cuda_ok(cudaMalloc(&tokens, token_bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&out, token_bytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&idx, sizeof(int32_t) * kTokens * kTopk), "cudaMalloc");
    cuda_ok(cudaMalloc(&weights, sizeof(float) * kTokens * kTopk), "cudaMalloc");
    cuda_ok(cudaMemset(tokens, 0, token_bytes), "cudaMemset");
    // Token t picks experts t and t + E/2 (mod E): distinct, and every rank gets rows.
    const int experts = config.num_experts;
    std::vector<int32_t> host_idx(size_t{kTokens} * kTopk);
    std::vector<float> host_w(host_idx.size(), 0.5f);
    for (int t = 0; t < kTokens; ++t)
      for (int k = 0; k < kTopk; ++k) host_idx[size_t(t) * kTopk + k] = (t + comm.rank() + k * experts / 2) % experts;
    cuda_ok(cudaMemcpy(idx, host_idx.data(), host_idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(weights, host_w.data(), host_w.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~EpWork() override {
    buf.reset();
    cudaFree(tokens);
    cudaFree(out);
    cudaFree(idx);
    cudaFree(weights);
  }
  void round(const std::function<void(Op)>& before, bool) override {
    before(Op::kDispatch);
    result = buf->dispatch(TensorView(tokens, DataType::kBFloat16, {kTokens, kHidden}),
                           TensorView(idx, DataType::kInt32, {kTokens, kTopk}),
                           TensorView(weights, DataType::kFloat32, {kTokens, kTopk}), TensorView{}, stream);
    comm.synchronize(stream);
    before(Op::kCombine);
    // The dispatch output is the stand-in expert output (bf16, the same layout).
    const TensorView expert =
        c.mode == EpMode::kHighThroughput
            ? TensorView(result.tokens, DataType::kBFloat16, {result.num_rows, kHidden})
            : TensorView(result.tokens, DataType::kBFloat16,
                         {result.local_experts, result.capacity_per_expert, kHidden});
    buf->combine(expert, result.handle, TensorView(out, DataType::kBFloat16, {kTokens, kHidden}), stream);
    comm.synchronize(stream);
  }
};



}  // namespace ferry::testing::killed_peer
