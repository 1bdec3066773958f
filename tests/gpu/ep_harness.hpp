// Shared harness of the EP dispatch/combine GPU tests (test_ep_*.cpp).
//
// Expert-parallel dispatch/combine on real GPUs (mpirun -np 1..8, one GPU per
// rank), against the host reference in common/ep_reference.hpp. Every rank
// generates every rank's inputs from (seed, rank), so each rank knows exactly
// which rows it must receive and what its combine must return.
//
// Every checked round: poisons (0xFF) the previous dispatch output, the expert
// outputs and the combine output (plus a guard after it) first; checks counts,
// offsets, the num_rows / host counts contract, every real row (bf16 bitwise,
// fp8 quantization within the e4m3 error with the prescribed scale, fp8 input
// bitwise), every weight, every combine element (exact zeros for tokens without
// experts), the guard, and that the inputs were not modified. The stand-in expert
// runs on the host (y = bf16(x * factor(global expert))), or, where the round is
// captured in a CUDA graph, is the dispatch output itself or precomputed rows.
//
// One Communicator, stream and seed sequence serve every EP test of the program:
// shared() (defined once, in ep_harness.cpp) creates them on first use, and the
// global test environment registered there frees them before MPI finalizes.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"

namespace ferry::testing::ep_gpu {

// The library's names the harness and the tests use (test files: using namespace ep_gpu).
using ferry::DataType;
using ferry::DispatchOptions;
using ferry::DispatchResult;
using ferry::EpBuffer;
using ferry::EpConfig;
using ferry::EpHandle;
using ferry::EpMode;
using ferry::TensorView;

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CK(expr) ::ferry::testing::ep_gpu::cuda_check((expr), #expr)

// ---------------------------------------------------------------- shared state
struct Shared {
  std::unique_ptr<ferry::Communicator> comm;
  cudaStream_t stream = nullptr;
  uint64_t seed = 0;
  uint64_t cases = 0;
  ~Shared() {
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    comm.reset();
  }
  uint64_t next_seed() { return ep::mix64(seed ^ ep::mix64(++cases)); }  // same sequence on every rank
};
// The one Shared of the program (created on first use; see ep_harness.cpp).
Shared& shared();

// EP runs on one node (the NVLink kernels) and across nodes (FERRY_RANKS_PER_NODE:
// the cross-node path), against the same references; up to 8 ranks either way
// (EpBuffer throws NotSupported beyond).
#define REQUIRE_EP()     \
  FERRY_REQUIRE_GPUS();  \
  if (::ferry::testing::mpi_size() > 8) GTEST_SKIP() << "EP holds at most 8 ranks"

// ---------------------------------------------------------------- device memory
class DevMem {
 public:
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  ~DevMem() { release(); }
  void ensure(size_t bytes) {
    bytes = std::max<size_t>(bytes, 256);
    if (bytes <= bytes_) return;
    release();
    CK(cudaMalloc(&p_, bytes));
    bytes_ = bytes;
  }
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  char* bytes() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// ---------------------------------------------------------------- configs and problems
const char* mode_id(EpMode m);
const char* dtype_id(DataType t);
// Whether an EpBuffer of `mode` on `comm` takes the hierarchical cross-node path:
// high-throughput, several nodes of several ranks each, unless FERRY_EP_HIERARCHICAL=0.
bool expect_hierarchical(const Communicator& comm, EpMode mode);

// EpBuffer::route of idx on a new stream that waits for `stream` first; `stream` then waits
// for it (an event): how a caller runs the layout beside other work. Returns route's handle.
EpHandle route_on_side_stream(EpBuffer& buf, const TensorView& idx, cudaStream_t stream);

EpConfig make_config(EpMode mode, DataType dispatch_type, int tokens, int hidden, int topk, int local_experts,
                     bool with_weights = true, int alignment = 1);

ep::Spec make_spec(const EpConfig& c, uint64_t seed, ep::Routing routing, ep::TokenCounts counts,
                   bool fp8_input = false, int hot = 0);

std::string describe(const EpConfig& c, const ep::Spec& s);

// ---------------------------------------------------------------- what a rank read back
struct Received {
  std::vector<int32_t> counts;   // device counts, as returned
  std::vector<int64_t> offsets;  // device offsets, as returned
  std::vector<int64_t> fetched;  // rows read back per expert (0 where offsets / counts are unusable)
  std::vector<int64_t> base;     // first row of each expert in the host arrays below
  std::vector<uint8_t> tokens;   // rows * H * element size
  std::vector<float> scales;     // rows * H / 128
  std::vector<float> weights;    // rows
};

// ep_harness_checks.cpp: FNV-1a of n bytes (hashes compared across rounds), the e4m3 decoding table (the reference
// decoder, tabulated), and the element size of a config's dispatched rows.
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
const std::array<float, 256>& fp8_table();
size_t dispatch_elem(const EpConfig& c);

// Reads back counts, offsets and every real row. Synchronizes the stream.
Received fetch(const DispatchResult& r, const EpConfig& c, int local_experts, cudaStream_t stream);

struct DispatchExpect {
  bool sync_counts = true;  // high-throughput: num_rows and host counts must be filled
};

// Checks a dispatch result and its read-back rows against the reference.
// Returns a hash of the real rows (tokens, scales, weights), which does not
// depend on the layout's padding. Records gtest failures.
uint64_t verify_dispatch(const DispatchResult& r, const Received& rx, const EpConfig& c, const ep::Spec& s,
                         const std::vector<ep::RankInput>& all, const DispatchExpect& ex, const std::string& what);

// Checks a combine output (bf16 [T', H]) and the poisoned guard after it;
// returns its hash.
uint64_t verify_combine(const std::vector<uint16_t>& out, const std::vector<uint8_t>& guard, const ep::CombineRef& ref,
                        int num_tokens, int hidden, const std::string& what);

// ---------------------------------------------------------------- one EpBuffer and its I/O buffers
class Harness {
 public:
  struct Options {
    bool idx64 = false;
    bool sync_counts = true;
    bool halves = false;
    bool poison = true;                 // poison the previous dispatch output (sync + barrier first)
    const EpHandle* reuse = nullptr;    // re-dispatch with this handle's routing
    bool reuse_passes_idx = false;      // ... still passing topk_idx (it must match)
    bool route_ahead = false;           // EpBuffer::route on a side stream, then the dispatch reuses it
    // Runs between dispatch and combine (all ranks): e.g. bad combine calls.
    std::function<void(const DispatchResult&, const TensorView& expert_outputs, const TensorView& out)> before_combine;
  };
  struct Outcome {
    uint64_t dispatch_hash = 0, out_hash = 0;
    EpHandle handle;
  };

  Harness(Shared& s, const EpConfig& cfg);
  ~Harness();
  bool alive() const { return alive_; }
  EpBuffer& buf() { return *buf_; }
  const EpConfig& config() const { return cfg_; }
  int local_experts() const { return cfg_.num_experts / mpi_size(); }
  cudaStream_t stream() const { return s_.stream; }
  DevMem& tokens_mem() { return tokens_; }
  DevMem& out_mem() { return out_; }
  DevMem& expert_out_mem() { return expert_out_; }

  // Uploads this rank's inputs (on the stream).
  void upload(const ep::Spec& s, const ep::RankInput& in, bool idx64);
  TensorView tokens_view(const ep::Spec& s, int n) const {
    return TensorView(tokens_.get(), s.fp8_input ? DataType::kFloat8E4M3 : DataType::kBFloat16, {n, s.hidden});
  }
  TensorView idx_view(const ep::Spec& s, int n, bool idx64) const {
    return TensorView(idx_.get(), idx64 ? DataType::kInt64 : DataType::kInt32, {n, s.topk});
  }
  TensorView weights_view(const ep::Spec& s, int n) const {
    return s.with_weights ? TensorView(weights_.get(), DataType::kFloat32, {n, s.topk}) : TensorView();
  }
  TensorView scales_view(const ep::Spec& s, int n) const {
    return s.fp8_input ? TensorView(scales_.get(), DataType::kFloat32, {n, s.groups()}) : TensorView();
  }
  // One dispatch + combine of n bf16 tokens (int64 ids, weights) with no host
  // synchronization, the dispatch output fed back as the expert outputs
  // (identity experts): through the send/recv halves or dispatch()/combine().
  DispatchResult unsynced_identity_round(const void* tokens, const void* idx, const void* weights, int n,
                                         bool halves);
  // A rank with no tokens passes a null `out`, as PyTorch does for an empty tensor (data_ptr() == 0).
  TensorView out_view(int n) const {
    return TensorView(n == 0 ? nullptr : out_.get(), DataType::kBFloat16, {n, cfg_.hidden});
  }
  // The expert outputs for a dispatch result, in its layout: [rows, H] or [Le, capacity, H].
  TensorView expert_view(const DispatchResult& r, const void* data, bool sync_counts) const {
    if (cfg_.mode == EpMode::kLowLatency)
      return TensorView(data, DataType::kBFloat16, {local_experts(), r.capacity_per_expert, cfg_.hidden});
    const int64_t rows = sync_counts && r.num_rows >= 0 ? r.num_rows : r.capacity_rows;
    return TensorView(data, DataType::kBFloat16, {rows, cfg_.hidden});
  }

  // Poisons the previous dispatch output, once every rank has finished with it.
  void poison_previous();
  void remember(const DispatchResult& r) { prev_ = r; }

  // The stand-in experts on the host: y = bf16(received value * factor(expert))
  // into expert_out_ at the rows the dispatch reported; every other row 0xFF
  // (bf16 NaN), so a combine reading a padding row or an unused slot shows.
  void run_stand_in(const DispatchResult& r, const Received& rx);

  void poison_out() { CK(cudaMemsetAsync(out_.get(), 0xFF, out_.size(), s_.stream)); }
  // Reads back out[n, H] and the guard after it. Synchronizes.
  void fetch_out(int n, std::vector<uint16_t>* out, std::vector<uint8_t>* guard);

  // Checks the device inputs still hold what upload() put there.
  void verify_inputs_unchanged(const ep::Spec& s, const ep::RankInput& in, bool idx64, bool check_idx, const std::string& what);

  // One checked dispatch + stand-in + combine round. Collective. Returns false
  // on every rank if any rank threw (the caller stops the test).
  bool round(const ep::Spec& s, const std::vector<ep::RankInput>& all, const Options& o, Outcome* outcome = nullptr);

  bool c_quantized(const ep::Spec& s) const { return cfg_.dispatch_type == DataType::kFloat8E4M3 && !s.fp8_input; }

 private:
  Shared& s_;
  EpConfig cfg_;
  std::unique_ptr<EpBuffer> buf_;
  bool alive_ = false;
  DevMem tokens_, idx_, weights_, scales_, out_, expert_out_;
  std::vector<int32_t> idx32_;
  DispatchResult prev_;
};

// Fresh inputs and one checked round.
bool run_case(Harness& h, ep::Routing routing, ep::TokenCounts counts, const Harness::Options& o = {},
              bool fp8_input = false, int hot = 0, Harness::Outcome* outcome = nullptr);

inline const std::vector<EpMode> kModes = {EpMode::kHighThroughput, EpMode::kLowLatency};

// One row of a dispatch/combine matrix (test_ep_matrix.cpp, test_ep_rank_rows.cpp):
// shape, routing, token counts, index type, weights, alignment (high-throughput
// only), sync_counts and API (whole calls or send/recv halves).
struct MatrixRow {
  int hidden, topk, local_experts;
  ep::Routing routing;
  ep::TokenCounts counts;
  bool idx64, weights;
  int alignment;
  bool sync_counts, halves;
};

}  // namespace ferry::testing::ep_gpu
