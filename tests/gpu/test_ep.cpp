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
// Bad calls are made by every rank together (host validation throws before any
// communication), except an out-of-range expert id, which only rank 0 passes.
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
#include <functional>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/expect_error.hpp"
#include "common/host_types.hpp"
#include "common/test_util.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace {

using ferry::DataType;
using ferry::DispatchOptions;
using ferry::DispatchResult;
using ferry::EpBuffer;
using ferry::EpConfig;
using ferry::EpHandle;
using ferry::EpMode;
using ferry::TensorView;
using namespace ferry::testing;
namespace ep = ferry::testing::ep;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CK(expr) cuda_check((expr), #expr)

constexpr size_t kGuard = 4096;  // poisoned bytes checked after the combine output

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// e4m3 decoding table (the reference decoder, tabulated for speed).
const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = ep::fp8_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

// `name` appears in the message as a whole word (so "out" is not matched by
// "expert_outputs").
bool names_word(const std::string& what, const std::string& name) {
  const std::regex re("(^|[^A-Za-z0-9_])" + name + "([^A-Za-z0-9_]|$)", std::regex::icase);
  return std::regex_search(user_part(what), re);
}

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
std::unique_ptr<Shared>& shared_slot() {
  static std::unique_ptr<Shared> s;
  return s;
}
Shared& shared() {
  auto& s = shared_slot();
  if (s) return *s;
  s = std::make_unique<Shared>();
  s->comm = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>());
  CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  s->seed = ferry::testing::broadcast_test_seed("ep");
  return *s;
}
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new ferry::testing::TearDownEnvironment([] { shared_slot().reset(); }));

#define REQUIRE_EP()             \
  FERRY_REQUIRE_GPUS();          \
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "EP runs inside one node"

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
const char* mode_id(EpMode m) { return m == EpMode::kHighThroughput ? "ht" : "ll"; }
const char* dtype_id(DataType t) { return t == DataType::kFloat8E4M3 ? "fp8" : "bf16"; }

// E = world * Le, Le raised so that K <= E.
int experts_for(int world, int le, int topk) {
  while (world * le < topk) ++le;
  return world * le;
}

EpConfig make_config(EpMode mode, DataType dispatch_type, int tokens, int hidden, int topk, int local_experts,
                     bool with_weights = true, int alignment = 1) {
  EpConfig c;
  c.mode = mode;
  c.dispatch_type = dispatch_type;
  c.max_tokens_per_rank = tokens;
  c.hidden = hidden;
  c.topk = topk;
  c.num_experts = experts_for(mpi_size(), local_experts, topk);
  c.with_weights = with_weights;
  c.expert_alignment = mode == EpMode::kHighThroughput ? alignment : 1;
  return c;
}

ep::Spec make_spec(const EpConfig& c, uint64_t seed, ep::Routing routing, ep::TokenCounts counts,
                   bool fp8_input = false, int hot = 0) {
  ep::Spec s;
  s.world = mpi_size();
  s.max_tokens = c.max_tokens_per_rank;
  s.hidden = c.hidden;
  s.topk = c.topk;
  s.num_experts = c.num_experts;
  s.with_weights = c.with_weights;
  s.fp8_input = fp8_input;
  s.routing = routing;
  s.counts = counts;
  s.hot = hot;
  s.seed = seed;
  return s;
}

const char* routing_id(ep::Routing r) {
  return std::array{"uniform", "drops", "zipf", "one_expert", "one_rank", "none"}[static_cast<int>(r)];
}
const char* counts_id(ep::TokenCounts c) {
  return std::array{"full", "varied", "some_zero", "only_rank0", "all_zero"}[static_cast<int>(c)];
}

std::string describe(const EpConfig& c, const ep::Spec& s) {
  std::ostringstream os;
  os << mode_id(c.mode) << " " << dtype_id(c.dispatch_type) << (s.fp8_input ? " (fp8 input)" : "") << " T "
     << c.max_tokens_per_rank << " H " << c.hidden << " K " << c.topk << " E " << c.num_experts << " align "
     << c.expert_alignment << (c.with_weights ? " weights" : " no-weights") << " routing " << routing_id(s.routing)
     << " counts " << counts_id(s.counts) << " seed " << s.seed << " (rank " << mpi_rank() << " of " << mpi_size()
     << ")";
  return os.str();
}

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

size_t dispatch_elem(const EpConfig& c) { return c.dispatch_type == DataType::kFloat8E4M3 ? 1 : 2; }

// Reads back counts, offsets and every real row. Synchronizes the stream.
Received fetch(const DispatchResult& r, const EpConfig& c, int local_experts, cudaStream_t stream) {
  const int Le = local_experts;
  const size_t H = static_cast<size_t>(c.hidden), G = H / ep::kScaleGroup, es = dispatch_elem(c);
  Received rx;
  rx.counts.assign(static_cast<size_t>(Le), -1);
  rx.offsets.assign(static_cast<size_t>(Le) + 1, -1);
  if (r.expert_counts) CK(cudaMemcpyAsync(rx.counts.data(), r.expert_counts, Le * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  if (r.expert_offsets) CK(cudaMemcpyAsync(rx.offsets.data(), r.expert_offsets, (Le + 1) * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  CK(cudaStreamSynchronize(stream));
  rx.fetched.assign(static_cast<size_t>(Le), 0);
  rx.base.assign(static_cast<size_t>(Le) + 1, 0);
  for (int le = 0; le < Le; ++le) {
    const int64_t off = rx.offsets[le], n = rx.counts[le];
    if (r.tokens && off >= 0 && n > 0 && off <= r.capacity_rows) rx.fetched[le] = std::min(n, r.capacity_rows - off);
    rx.base[le + 1] = rx.base[le] + rx.fetched[le];
  }
  const size_t rows = static_cast<size_t>(rx.base[Le]);
  rx.tokens.assign(rows * H * es, 0);
  if (r.scales) rx.scales.assign(rows * G, 0.0f);
  if (r.weights) rx.weights.assign(rows, 0.0f);
  for (int le = 0; le < Le; ++le) {
    const size_t n = static_cast<size_t>(rx.fetched[le]), b = static_cast<size_t>(rx.base[le]);
    const size_t off = static_cast<size_t>(std::max<int64_t>(rx.offsets[le], 0));
    if (n == 0) continue;
    CK(cudaMemcpyAsync(rx.tokens.data() + b * H * es, static_cast<const char*>(r.tokens) + off * H * es, n * H * es,
                       cudaMemcpyDeviceToHost, stream));
    if (r.scales)
      CK(cudaMemcpyAsync(rx.scales.data() + b * G, r.scales + off * G, n * G * sizeof(float), cudaMemcpyDeviceToHost, stream));
    if (r.weights)
      CK(cudaMemcpyAsync(rx.weights.data() + b, r.weights + off, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  CK(cudaStreamSynchronize(stream));
  return rx;
}

// Value of element h of received row `row` (host array index) as the expert sees it.
float received_value(const Received& rx, const EpConfig& c, size_t row, size_t h) {
  const size_t H = static_cast<size_t>(c.hidden);
  if (c.dispatch_type == DataType::kFloat8E4M3)
    return fp8_table()[rx.tokens[row * H + h]] * rx.scales[row * (H / ep::kScaleGroup) + h / ep::kScaleGroup];
  uint16_t b;
  std::memcpy(&b, &rx.tokens[(row * H + h) * 2], 2);
  return bf16_to_float(b);
}

struct DispatchExpect {
  bool sync_counts = true;  // high-throughput: num_rows and host counts must be filled
};

// Checks a dispatch result and its read-back rows against the reference.
// Returns a hash of the real rows (tokens, scales, weights), which does not
// depend on the layout's padding. Records gtest failures.
uint64_t verify_dispatch(const DispatchResult& r, const Received& rx, const EpConfig& c, const ep::Spec& s,
                         const std::vector<ep::RankInput>& all, const DispatchExpect& ex, const std::string& what) {
  const int me = mpi_rank(), W = mpi_size(), Le = c.num_experts / W;
  const bool ht = c.mode == EpMode::kHighThroughput, fp8 = c.dispatch_type == DataType::kFloat8E4M3;
  const size_t H = static_cast<size_t>(c.hidden), G = H / ep::kScaleGroup, es = dispatch_elem(c);
  const ep::Layout ref = ep::reference_layout(s, all, me, ht ? c.expert_alignment : 0);
  size_t errors = 0;
  std::ostringstream first;
  auto bad = [&](const std::string& msg) {
    if (errors++ < 8) first << "\n  " << msg;
  };

  EXPECT_EQ(r.local_experts, Le) << what;
  EXPECT_NE(r.tokens, nullptr) << what;
  EXPECT_NE(r.expert_counts, nullptr) << what;
  EXPECT_NE(r.expert_offsets, nullptr) << what;
  EXPECT_EQ(r.scales != nullptr, fp8) << "scales are returned exactly for fp8 dispatch: " << what;
  EXPECT_EQ(r.weights != nullptr, c.with_weights) << "weights are returned exactly with_weights: " << what;
  EXPECT_NE(r.handle.generation, 0u) << what;
  EXPECT_EQ(r.handle.num_tokens, all[me].num_tokens) << what;
  EXPECT_EQ(r.handle.with_weights, c.with_weights) << what;
  if (ht) {
    EXPECT_GE(r.capacity_rows, ref.total_rows()) << what;
    if (ex.sync_counts) {
      EXPECT_EQ(r.num_rows, ref.total_rows()) << what;
      EXPECT_EQ(r.host_expert_counts, ref.counts) << what;
    } else {
      EXPECT_EQ(r.num_rows, -1) << "sync_counts=false must not report num_rows: " << what;
      EXPECT_TRUE(r.host_expert_counts.empty()) << what;
    }
  } else {
    EXPECT_EQ(r.capacity_per_expert, s.capacity()) << what;
    EXPECT_GE(r.capacity_rows, Le * s.capacity()) << what;
    EXPECT_EQ(r.num_rows, -1) << "low-latency never synchronizes: " << what;
    EXPECT_TRUE(r.host_expert_counts.empty()) << what;
  }
  for (int le = 0; le <= Le; ++le)
    if (rx.offsets[le] != ref.offsets[le])
      bad("offsets[" + std::to_string(le) + "] = " + std::to_string(rx.offsets[le]) + ", want " + std::to_string(ref.offsets[le]));
  for (int le = 0; le < Le; ++le)
    if (rx.counts[le] != ref.counts[le])
      bad("counts[" + std::to_string(le) + "] = " + std::to_string(rx.counts[le]) + ", want " + std::to_string(ref.counts[le]));

  const auto& f8 = fp8_table();
  uint64_t hash = 0xcbf29ce484222325ull;
  for (int le = 0; le < Le; ++le) {
    const int64_t n = std::min<int64_t>(rx.fetched[le], ref.counts[le]);
    for (int64_t i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(rx.base[le] + i);
      const ep::Entry& e = ref.rows[le][static_cast<size_t>(i)];
      const ep::RankInput& src = all[e.src_rank];
      const size_t t = static_cast<size_t>(e.src_token);
      auto where = [&] {
        return "expert " + std::to_string(le) + " row " + std::to_string(i) + " (from rank " + std::to_string(e.src_rank) +
               " token " + std::to_string(e.src_token) + " k " + std::to_string(e.k) + ")";
      };
      const uint8_t* got = &rx.tokens[row * H * es];
      hash = fnv1a(got, H * es, hash);
      if (c.with_weights) {
        const float want = src.weights[t * s.topk + e.k];
        if (!(rx.weights[row] == want)) bad(where() + ": weight " + std::to_string(rx.weights[row]) + ", want " + std::to_string(want));
        hash = fnv1a(&rx.weights[row], sizeof(float), hash);
      }
      if (fp8) hash = fnv1a(&rx.scales[row * G], G * sizeof(float), hash);
      if (!fp8) {
        if (std::memcmp(got, &src.x[t * H], H * 2) != 0) bad(where() + ": bf16 row differs from the source token");
      } else if (s.fp8_input) {
        if (std::memcmp(got, &src.q[t * H], H) != 0) bad(where() + ": fp8 bytes differ from the input");
        if (std::memcmp(&rx.scales[row * G], &src.scales[t * G], G * sizeof(float)) != 0)
          bad(where() + ": scales differ from the input");
      } else {
        for (size_t g = 0; g < G; ++g) {
          const float scale = rx.scales[row * G + g];
          const float want_scale = ep::expected_scale(src.amax(s, static_cast<int>(t), static_cast<int>(g)));
          if (!(std::fabs(scale - want_scale) <= 1e-6f * want_scale)) {
            bad(where() + ": group " + std::to_string(g) + " scale " + std::to_string(scale) + ", want max(amax, 1e-4)/448 = " +
                std::to_string(want_scale));
            continue;
          }
          for (size_t h = g * ep::kScaleGroup; h < (g + 1) * ep::kScaleGroup; ++h) {
            const double x = src.value(s, static_cast<int>(t), static_cast<int>(h));
            const double deq = static_cast<double>(f8[got[h]]) * scale;
            if (!(std::fabs(deq - x) <= ep::fp8_quant_bound(x, scale))) {
              bad(where() + ": column " + std::to_string(h) + " dequantizes to " + std::to_string(deq) + ", input " +
                  std::to_string(x) + " (scale " + std::to_string(scale) + ")");
              break;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(errors, 0u) << errors << " mismatches in the dispatch output: " << what << first.str();
  return hash;
}

// Checks a combine output (bf16 [T', H]) and the poisoned guard after it;
// returns its hash.
uint64_t verify_combine(const std::vector<uint16_t>& out, const std::vector<uint8_t>& guard, const ep::CombineRef& ref,
                        int num_tokens, int hidden, const std::string& what) {
  size_t errors = 0;
  std::ostringstream first;
  const size_t H = static_cast<size_t>(hidden);
  for (size_t t = 0; t < static_cast<size_t>(num_tokens); ++t)
    for (size_t h = 0; h < H; ++h) {
      const size_t i = t * H + h;
      const float got = bf16_to_float(out[i]);
      const bool ok = ref.no_expert[t] ? got == 0.0f : std::fabs(got - ref.ref[i]) <= ref.tol[i];
      if (!ok && errors++ < 8)
        first << "\n  [" << t << ", " << h << "] got " << got << " want " << (ref.no_expert[t] ? 0.0 : ref.ref[i])
              << (ref.no_expert[t] ? " exactly (no expert)" : " +- " + std::to_string(ref.tol[i]));
    }
  size_t bad_guard = 0;
  for (uint8_t b : guard) bad_guard += b != 0xFF;
  EXPECT_EQ(errors, 0u) << errors << " of " << out.size() << " combine elements wrong: " << what << first.str();
  EXPECT_EQ(bad_guard, 0u) << "combine wrote past out[" << num_tokens << ", " << hidden << "]: " << what;
  return fnv1a(out.data(), out.size() * 2);
}

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
    // Runs between dispatch and combine (all ranks): e.g. bad combine calls.
    std::function<void(const DispatchResult&, const TensorView& expert_outputs, const TensorView& out)> before_combine;
  };
  struct Outcome {
    uint64_t dispatch_hash = 0, out_hash = 0;
    EpHandle handle;
  };

  Harness(Shared& s, const EpConfig& cfg) : s_(s), cfg_(cfg) {
    std::string error;
    try {
      buf_ = std::make_unique<EpBuffer>(*s.comm, cfg);
      const size_t T = static_cast<size_t>(cfg.max_tokens_per_rank) + 1, H = static_cast<size_t>(cfg.hidden);
      tokens_.ensure(T * H * 2);
      idx_.ensure(T * cfg.topk * 8);
      weights_.ensure(T * cfg.topk * 4);
      scales_.ensure(T * (H / ep::kScaleGroup) * 4);
      out_.ensure(T * H * 2 + kGuard);
    } catch (const std::exception& e) {
      error = e.what();
    }
    alive_ = all_ranks(error.empty());
    if (!error.empty()) ADD_FAILURE() << "EpBuffer construction failed: " << error;
    if (alive_) {
      EXPECT_EQ(buf_->local_experts(), cfg.num_experts / mpi_size());
      EXPECT_EQ(buf_->world_size(), mpi_size());
      EXPECT_EQ(buf_->rank(), mpi_rank());
    }
  }
  ~Harness() {
    if (s_.stream) cudaStreamSynchronize(s_.stream);
    buf_.reset();
  }
  bool alive() const { return alive_; }
  EpBuffer& buf() { return *buf_; }
  const EpConfig& config() const { return cfg_; }
  int local_experts() const { return cfg_.num_experts / mpi_size(); }
  cudaStream_t stream() const { return s_.stream; }
  DevMem& tokens_mem() { return tokens_; }
  DevMem& out_mem() { return out_; }
  DevMem& expert_out_mem() { return expert_out_; }

  // Uploads this rank's inputs (on the stream).
  void upload(const ep::Spec& s, const ep::RankInput& in, bool idx64) {
    const size_t T = static_cast<size_t>(in.num_tokens), H = static_cast<size_t>(s.hidden);
    if (T == 0) return;
    if (s.fp8_input) {
      CK(cudaMemcpyAsync(tokens_.get(), in.q.data(), T * H, cudaMemcpyHostToDevice, s_.stream));
      CK(cudaMemcpyAsync(scales_.get(), in.scales.data(), in.scales.size() * 4, cudaMemcpyHostToDevice, s_.stream));
    } else {
      CK(cudaMemcpyAsync(tokens_.get(), in.x.data(), T * H * 2, cudaMemcpyHostToDevice, s_.stream));
    }
    if (idx64) {
      CK(cudaMemcpyAsync(idx_.get(), in.idx.data(), in.idx.size() * 8, cudaMemcpyHostToDevice, s_.stream));
    } else {
      idx32_.assign(in.idx.begin(), in.idx.end());
      CK(cudaMemcpyAsync(idx_.get(), idx32_.data(), idx32_.size() * 4, cudaMemcpyHostToDevice, s_.stream));
    }
    if (s.with_weights)
      CK(cudaMemcpyAsync(weights_.get(), in.weights.data(), in.weights.size() * 4, cudaMemcpyHostToDevice, s_.stream));
    CK(cudaStreamSynchronize(s_.stream));  // idx32_ is reused by the next upload
  }
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
  TensorView out_view(int n) const { return TensorView(out_.get(), DataType::kBFloat16, {n, cfg_.hidden}); }
  // The expert outputs for a dispatch result, in its layout: [rows, H] or [Le, capacity, H].
  TensorView expert_view(const DispatchResult& r, const void* data, bool sync_counts) const {
    if (cfg_.mode == EpMode::kLowLatency)
      return TensorView(data, DataType::kBFloat16, {local_experts(), r.capacity_per_expert, cfg_.hidden});
    const int64_t rows = sync_counts && r.num_rows >= 0 ? r.num_rows : r.capacity_rows;
    return TensorView(data, DataType::kBFloat16, {rows, cfg_.hidden});
  }

  // Poisons the previous dispatch output, once every rank has finished with it.
  void poison_previous() {
    if (prev_.tokens) {
      const size_t rows = static_cast<size_t>(prev_.capacity_rows), H = static_cast<size_t>(cfg_.hidden);
      CK(cudaMemsetAsync(prev_.tokens, 0xFF, rows * H * dispatch_elem(cfg_), s_.stream));
      if (prev_.scales) CK(cudaMemsetAsync(prev_.scales, 0xFF, rows * (H / ep::kScaleGroup) * 4, s_.stream));
      if (prev_.weights) CK(cudaMemsetAsync(prev_.weights, 0xFF, rows * 4, s_.stream));
    }
    CK(cudaStreamSynchronize(s_.stream));
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void remember(const DispatchResult& r) { prev_ = r; }

  // The stand-in experts on the host: y = bf16(received value * factor(expert))
  // into expert_out_ at the rows the dispatch reported; every other row 0xFF
  // (bf16 NaN), so a combine reading a padding row or an unused slot shows.
  void run_stand_in(const DispatchResult& r, const Received& rx) {
    const int Le = local_experts(), me = mpi_rank();
    const size_t H = static_cast<size_t>(cfg_.hidden);
    expert_out_.ensure(static_cast<size_t>(std::max<int64_t>(r.capacity_rows, 1)) * H * 2);
    CK(cudaMemsetAsync(expert_out_.get(), 0xFF, static_cast<size_t>(std::max<int64_t>(r.capacity_rows, 0)) * H * 2, s_.stream));
    std::vector<uint16_t> y(static_cast<size_t>(rx.base[Le]) * H);
    for (int le = 0; le < Le; ++le) {
      const int64_t e = static_cast<int64_t>(me) * Le + le;
      for (int64_t i = 0; i < rx.fetched[le]; ++i) {
        const size_t row = static_cast<size_t>(rx.base[le] + i);
        for (size_t h = 0; h < H; ++h) y[row * H + h] = ep::stand_in(received_value(rx, cfg_, row, h), e);
      }
      if (rx.fetched[le] > 0)
        CK(cudaMemcpyAsync(expert_out_.bytes() + static_cast<size_t>(rx.offsets[le]) * H * 2,
                           &y[static_cast<size_t>(rx.base[le]) * H], static_cast<size_t>(rx.fetched[le]) * H * 2,
                           cudaMemcpyHostToDevice, s_.stream));
    }
    CK(cudaStreamSynchronize(s_.stream));
  }

  void poison_out() { CK(cudaMemsetAsync(out_.get(), 0xFF, out_.size(), s_.stream)); }
  // Reads back out[n, H] and the guard after it. Synchronizes.
  void fetch_out(int n, std::vector<uint16_t>* out, std::vector<uint8_t>* guard) {
    const size_t bytes = static_cast<size_t>(n) * cfg_.hidden * 2;
    out->assign(bytes / 2, 0);
    guard->assign(kGuard, 0);
    if (bytes) CK(cudaMemcpyAsync(out->data(), out_.get(), bytes, cudaMemcpyDeviceToHost, s_.stream));
    CK(cudaMemcpyAsync(guard->data(), out_.bytes() + bytes, kGuard, cudaMemcpyDeviceToHost, s_.stream));
    CK(cudaStreamSynchronize(s_.stream));
  }

  // Checks the device inputs still hold what upload() put there.
  void verify_inputs_unchanged(const ep::Spec& s, const ep::RankInput& in, bool idx64, bool check_idx, const std::string& what) {
    const size_t T = static_cast<size_t>(in.num_tokens), H = static_cast<size_t>(s.hidden);
    if (T == 0) return;
    std::vector<uint8_t> tok(T * H * (s.fp8_input ? 1 : 2)), idx(T * s.topk * (idx64 ? 8 : 4));
    std::vector<float> w(s.with_weights ? T * s.topk : 0), sc(s.fp8_input ? T * s.groups() : 0);
    CK(cudaMemcpyAsync(tok.data(), tokens_.get(), tok.size(), cudaMemcpyDeviceToHost, s_.stream));
    CK(cudaMemcpyAsync(idx.data(), idx_.get(), idx.size(), cudaMemcpyDeviceToHost, s_.stream));
    if (!w.empty()) CK(cudaMemcpyAsync(w.data(), weights_.get(), w.size() * 4, cudaMemcpyDeviceToHost, s_.stream));
    if (!sc.empty()) CK(cudaMemcpyAsync(sc.data(), scales_.get(), sc.size() * 4, cudaMemcpyDeviceToHost, s_.stream));
    CK(cudaStreamSynchronize(s_.stream));
    const void* want_tok = s.fp8_input ? static_cast<const void*>(in.q.data()) : static_cast<const void*>(in.x.data());
    EXPECT_EQ(std::memcmp(tok.data(), want_tok, tok.size()), 0) << "tokens input modified: " << what;
    if (check_idx) {
      std::vector<int32_t> i32(in.idx.begin(), in.idx.end());
      const void* want_idx = idx64 ? static_cast<const void*>(in.idx.data()) : static_cast<const void*>(i32.data());
      EXPECT_EQ(std::memcmp(idx.data(), want_idx, idx.size()), 0) << "topk_idx input modified: " << what;
    }
    EXPECT_TRUE(w == in.weights) << "topk_weights input modified: " << what;
    EXPECT_TRUE(sc == in.scales) << "scales input modified: " << what;
  }

  // One checked dispatch + stand-in + combine round. Collective. Returns false
  // on every rank if any rank threw (the caller stops the test).
  bool round(const ep::Spec& s, const std::vector<ep::RankInput>& all, const Options& o, Outcome* outcome = nullptr) {
    const int me = mpi_rank();
    const ep::RankInput& mine = all[me];
    const int n = mine.num_tokens;
    const std::string what = describe(cfg_, s) + (o.idx64 ? " idx int64" : " idx int32") +
                             (o.halves ? " send/recv halves" : "") + (o.sync_counts ? "" : " sync_counts=false") +
                             (o.reuse ? " reuse" : "");
    DispatchResult r;
    std::string error;
    try {
      upload(s, mine, o.idx64);
      if (o.poison) poison_previous();
      DispatchOptions dopt;
      dopt.sync_counts = o.sync_counts;
      dopt.reuse = o.reuse;
      const TensorView idx = o.reuse && !o.reuse_passes_idx ? TensorView() : idx_view(s, n, o.idx64);
      if (o.halves) {
        const EpHandle h = buf_->dispatch_send(tokens_view(s, n), idx, weights_view(s, n), scales_view(s, n), s_.stream, dopt);
        r = buf_->dispatch_recv(h, s_.stream, dopt);
        EXPECT_EQ(r.handle.generation, h.generation) << what;
      } else {
        r = buf_->dispatch(tokens_view(s, n), idx, weights_view(s, n), scales_view(s, n), s_.stream, dopt);
      }
      s_.comm->synchronize(s_.stream);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) ADD_FAILURE() << "dispatch threw: " << error << "\n  " << what;
    if (!all_ranks(error.empty())) return false;
    remember(r);

    const Received rx = fetch(r, cfg_, local_experts(), s_.stream);
    DispatchExpect ex;
    ex.sync_counts = o.sync_counts;
    const uint64_t dhash = verify_dispatch(r, rx, cfg_, s, all, ex, what);

    std::vector<uint16_t> out;
    std::vector<uint8_t> guard;
    try {
      run_stand_in(r, rx);
      poison_out();
      const TensorView ev = expert_view(r, expert_out_.get(), o.sync_counts);
      if (o.before_combine) o.before_combine(r, ev, out_view(n));
      if (o.halves) {
        buf_->combine_send(ev, r.handle, s_.stream);
        buf_->combine_recv(r.handle, out_view(n), s_.stream);
      } else {
        buf_->combine(ev, r.handle, out_view(n), s_.stream);
      }
      s_.comm->synchronize(s_.stream);
      fetch_out(n, &out, &guard);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) ADD_FAILURE() << "combine threw: " << error << "\n  " << what;
    if (!all_ranks(error.empty())) return false;

    const ep::ExpertKind kind = c_quantized(s) ? ep::ExpertKind::kQuantized : ep::ExpertKind::kStandIn;
    const uint64_t ohash = verify_combine(out, guard, ep::combine_reference(s, mine, kind), n, cfg_.hidden, what);
    verify_inputs_unchanged(s, mine, o.idx64, !o.reuse || o.reuse_passes_idx, what);
    if (outcome) *outcome = Outcome{dhash, ohash, r.handle};
    return true;
  }

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
              bool fp8_input = false, int hot = 0, Harness::Outcome* outcome = nullptr) {
  const ep::Spec s = make_spec(h.config(), shared().next_seed(), routing, counts, fp8_input, hot);
  return h.round(s, ep::make_all_inputs(s), o, outcome);
}

// ---------------------------------------------------------------- the matrix
// mode x dispatch type x 8 (hidden, topk) rows, each row with its own local
// expert count, routing, token counts, index type, weights, alignment,
// sync_counts and API (whole calls or send/recv halves).
struct Row {
  int hidden, topk, local_experts;
  ep::Routing routing;
  ep::TokenCounts counts;
  bool idx64, weights;
  int alignment;  // high-throughput only
  bool sync_counts, halves;
};
const std::vector<Row> kRows = {
    {2048, 1, 1, ep::Routing::kUniform, ep::TokenCounts::kVaried, false, true, 1, true, false},
    {4096, 2, 3, ep::Routing::kDrops, ep::TokenCounts::kFull, true, true, 128, true, false},
    {2048, 3, 4, ep::Routing::kZipf, ep::TokenCounts::kSomeZero, false, true, 128, false, false},
    {7168, 4, 8, ep::Routing::kDrops, ep::TokenCounts::kVaried, true, true, 1, true, true},
    {7168, 5, 3, ep::Routing::kZipf, ep::TokenCounts::kFull, false, true, 1, true, false},
    {4096, 6, 4, ep::Routing::kUniform, ep::TokenCounts::kVaried, true, false, 128, true, false},
    {2048, 7, 1, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, false, true, 1, false, true},
    {7168, 8, 8, ep::Routing::kZipf, ep::TokenCounts::kVaried, true, true, 128, true, false},
};
using MatrixParam = std::tuple<EpMode, DataType, int>;  // mode, dispatch type, row

class EpMatrix : public ::testing::TestWithParam<MatrixParam> {};

// Two rounds on one buffer (different routing and token counts each time).
TEST_P(EpMatrix, DispatchCombine) {
  REQUIRE_EP();
  const auto [mode, dtype, row_index] = GetParam();
  const Row& row = kRows[static_cast<size_t>(row_index)];
  const int T = mode == EpMode::kHighThroughput ? 256 : 128;
  Harness h(shared(), make_config(mode, dtype, T, row.hidden, row.topk, row.local_experts, row.weights, row.alignment));
  ASSERT_TRUE(h.alive());
  Harness::Options o;
  o.idx64 = row.idx64;
  o.sync_counts = row.sync_counts;
  o.halves = row.halves;
  ASSERT_TRUE(run_case(h, row.routing, row.counts, o));
  const ep::Routing other = row.routing == ep::Routing::kZipf ? ep::Routing::kDrops : ep::Routing::kZipf;
  ASSERT_TRUE(run_case(h, other, ep::TokenCounts::kVaried, o));
}

INSTANTIATE_TEST_SUITE_P(Ep, EpMatrix,
                         ::testing::Combine(::testing::Values(EpMode::kHighThroughput, EpMode::kLowLatency),
                                            ::testing::Values(DataType::kBFloat16, DataType::kFloat8E4M3),
                                            ::testing::Range(0, static_cast<int>(kRows.size()))),
                         [](const auto& info) {
                           const Row& r = kRows[static_cast<size_t>(std::get<2>(info.param))];
                           return std::string(mode_id(std::get<0>(info.param))) + "_" + dtype_id(std::get<1>(info.param)) +
                                  "_h" + std::to_string(r.hidden) + "_k" + std::to_string(r.topk);
                         });

const std::vector<EpMode> kModes = {EpMode::kHighThroughput, EpMode::kLowLatency};

// ---------------------------------------------------------------- routing shapes
// Every token of every rank to one expert (the last rank's last one), then every
// token to all experts of one rank (that rank receives world * T * min(K, Le)
// rows: the worst case the buffer is sized for, exactly).
TEST(Ep, SkewAllTokensToOneExpertOrOneRank) {
  REQUIRE_EP();
  const int W = mpi_size();
  for (EpMode mode : kModes)
    for (int align : {1, 128}) {
      if (mode == EpMode::kLowLatency && align != 1) continue;
      SCOPED_TRACE(std::string(mode_id(mode)) + " align " + std::to_string(align));
      Harness h(shared(), make_config(mode, DataType::kBFloat16, 96, 2048, 4, 3, true, align));
      ASSERT_TRUE(h.alive());
      const int E = h.config().num_experts;
      ASSERT_TRUE(run_case(h, ep::Routing::kOneExpert, ep::TokenCounts::kFull, {}, false, E - 1));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneExpert, ep::TokenCounts::kVaried, {}, false, 0));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, false, W - 1));
      ASSERT_TRUE(run_case(h, ep::Routing::kOneRank, ep::TokenCounts::kFull, {}, false, 0));
    }
}

// Zipf-like popularity, larger problem: top-8 of 8 experts per rank, 512 tokens.
TEST(Ep, ZipfSkew) {
  REQUIRE_EP();
  {
    Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kBFloat16, 512, 4096, 8, 8, true, 128));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
  }
  {
    Harness h(shared(), make_config(EpMode::kLowLatency, DataType::kFloat8E4M3, 128, 7168, 8, 8));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kZipf, ep::TokenCounts::kFull));
  }
}

// The reference problem's shape (hidden 7168, top-8), 512 tokens per rank.
TEST(Ep, LargeHiddenManyTokens) {
  REQUIRE_EP();
  for (DataType dt : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
    Harness h(shared(), make_config(EpMode::kHighThroughput, dt, 512, 7168, 8, 4, true, 128));
    ASSERT_TRUE(h.alive());
    Harness::Options o;
    o.idx64 = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull, o));
  }
}

// Ranks with no tokens: all but rank 0, every other rank, every rank.
TEST(Ep, ZeroTokenRanks) {
  REQUIRE_EP();
  for (EpMode mode : kModes)
    for (DataType dt : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
      SCOPED_TRACE(std::string(mode_id(mode)) + " " + dtype_id(dt));
      Harness h(shared(), make_config(mode, dt, 64, 1024, 4, 2));
      ASSERT_TRUE(h.alive());
      for (auto counts : {ep::TokenCounts::kOnlyRank0, ep::TokenCounts::kSomeZero, ep::TokenCounts::kAllZero})
        for (bool sync : {true, false}) {
          if (mode == EpMode::kLowLatency && !sync) continue;
          Harness::Options o;
          o.sync_counts = sync;
          ASSERT_TRUE(run_case(h, ep::Routing::kUniform, counts, o));
        }
      ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));  // and back
    }
}

// Tokens whose slots are all -1 (every token, then a mix): nothing is sent for
// them and their combine output is exactly zero.
TEST(Ep, TokensWithoutExperts) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 1024, 6, 4));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kNone, ep::TokenCounts::kFull));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kFull));
    Harness::Options o;
    o.halves = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kNone, ep::TokenCounts::kVaried, o));
  }
}

// ---------------------------------------------------------------- identical results
// The same inputs with int32 and int64 topk_idx, with whole calls and with the
// send/recv halves, twice: the same rows and bitwise the same combine output.
TEST(Ep, IndexTypesAndApisGiveIdenticalResults) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 2048, 5, 3));
    ASSERT_TRUE(h.alive());
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kDrops, ep::TokenCounts::kVaried);
    const auto all = ep::make_all_inputs(s);
    std::vector<Harness::Outcome> results;
    for (int v = 0; v < 5; ++v) {
      Harness::Options o;
      o.idx64 = v % 2 == 1;
      o.halves = v >= 2 && v <= 3;
      Harness::Outcome out;
      ASSERT_TRUE(h.round(s, all, o, &out));
      results.push_back(out);
    }
    for (size_t v = 1; v < results.size(); ++v) {
      EXPECT_EQ(results[v].dispatch_hash, results[0].dispatch_hash) << "variant " << v;
      EXPECT_EQ(results[v].out_hash, results[0].out_hash) << "variant " << v;
      EXPECT_NE(results[v].handle.generation, results[v - 1].handle.generation) << "each dispatch is a new layout";
    }
  }
}

// High-throughput expert_alignment 1, 16 and 128 on the same inputs: offsets
// follow the alignment, the real rows and the combine output do not change.
TEST(Ep, ExpertAlignment) {
  REQUIRE_EP();
  std::vector<Harness::Outcome> results;
  const uint64_t seed = shared().next_seed();
  for (int align : {1, 16, 128}) {
    SCOPED_TRACE("align " + std::to_string(align));
    Harness h(shared(), make_config(EpMode::kHighThroughput, DataType::kBFloat16, 128, 1024, 4, 4, true, align));
    ASSERT_TRUE(h.alive());
    const ep::Spec s = make_spec(h.config(), seed, ep::Routing::kZipf, ep::TokenCounts::kVaried);
    Harness::Outcome out;
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), {}, &out));
    results.push_back(out);
  }
  for (size_t v = 1; v < results.size(); ++v) {
    EXPECT_EQ(results[v].dispatch_hash, results[0].dispatch_hash);
    EXPECT_EQ(results[v].out_hash, results[0].out_hash);
  }
}

// fp8 tokens with their scales travel bit-exact (high-throughput and low-latency).
TEST(Ep, Fp8InputPassThrough) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kFloat8E4M3, 96, 4096, 4, 3, true, 128));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, {}, /*fp8_input=*/true));
    Harness::Options o;
    o.sync_counts = false;
    o.idx64 = true;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kSomeZero, o, /*fp8_input=*/true));
    // bf16 input on the same buffer is quantized in the kernel.
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  }
}

// ---------------------------------------------------------------- handles
// Re-dispatch with the routing of the latest handle and new tokens: the same
// placement, the new data; with topk_idx omitted and with it given.
TEST(Ep, HandleReuse) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 64, 2048, 4, 3));
    ASSERT_TRUE(h.alive());
    const ep::Spec a = make_spec(h.config(), shared().next_seed(), ep::Routing::kDrops, ep::TokenCounts::kVaried);
    const auto all_a = ep::make_all_inputs(a);
    Harness::Outcome first;
    ASSERT_TRUE(h.round(a, all_a, {}, &first));
    // New token values, the same routing, weights and token counts.
    ep::Spec b = a;
    b.seed = shared().next_seed();
    b.counts = ep::TokenCounts::kFull;
    auto all_b = ep::make_all_inputs(b);
    for (int r = 0; r < mpi_size(); ++r) {
      all_b[r].num_tokens = all_a[r].num_tokens;
      all_b[r].idx = all_a[r].idx;
      all_b[r].weights = all_a[r].weights;
      all_b[r].x.resize(static_cast<size_t>(all_a[r].num_tokens) * b.hidden);
    }
    Harness::Options o;
    o.reuse = &first.handle;
    Harness::Outcome second;
    ASSERT_TRUE(h.round(b, all_b, o, &second));
    o.reuse = &second.handle;
    o.reuse_passes_idx = true;
    o.idx64 = true;
    Harness::Outcome third;
    ASSERT_TRUE(h.round(b, all_b, o, &third));
    EXPECT_EQ(third.dispatch_hash, second.dispatch_hash);
    EXPECT_EQ(third.out_hash, second.out_hash);
  }
}

// A handle from an older dispatch (or none) is rejected by combine and the
// halves; the buffer stays usable.
TEST(Ep, StaleHandleIsRejected) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    Harness h(shared(), make_config(mode, DataType::kBFloat16, 32, 1024, 2, 2));
    ASSERT_TRUE(h.alive());
    Harness::Outcome old_round, new_round;
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried, {}, false, 0, &old_round));
    // The second round's combine is preceded by combines with stale handles.
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kVaried);
    Harness::Options o;
    o.before_combine = [&](const DispatchResult& r, const TensorView& ev, const TensorView& out) {
      EXPECT_NE(r.handle.generation, old_round.handle.generation);
      for (const EpHandle& stale : {old_round.handle, EpHandle{}}) {
        std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine(ev, stale, out, h.stream()); });
        EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
        msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine_send(ev, stale, h.stream()); });
        EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
        // No combine_send yet: rejected either way (checked in order below).
        error_message<ferry::InvalidArgument>([&] { h.buf().combine_recv(stale, out, h.stream()); });
      }
    };
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), o, &new_round));
    // dispatch_recv with the handle of an older dispatch_send, then the right one.
    std::string error;
    try {
      const ep::Spec s2 = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
      const auto in = ep::make_input(s2, mpi_rank());
      h.upload(s2, in, false);
      const int n = in.num_tokens;
      const EpHandle latest = h.buf().dispatch_send(h.tokens_view(s2, n), h.idx_view(s2, n, false), h.weights_view(s2, n),
                                                    TensorView(), h.stream());
      std::string msg = error_message<ferry::InvalidArgument>(
          [&] { return h.buf().dispatch_recv(new_round.handle, h.stream()).num_rows; });
      EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
      const DispatchResult r = h.buf().dispatch_recv(latest, h.stream());
      // combine_recv with a stale handle after the right combine_send, then the right one.
      h.buf().combine_send(h.expert_view(r, r.tokens, true), r.handle, h.stream());
      msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine_recv(new_round.handle, h.out_view(n), h.stream()); });
      EXPECT_TRUE(contains_ci(msg, "handle")) << msg;
      h.buf().combine_recv(r.handle, h.out_view(n), h.stream());
      shared().comm->synchronize(h.stream());
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

// ---------------------------------------------------------------- bad input
// Every rank makes the same bad call; each throws InvalidArgument naming the
// argument before any communication, and a correct round works afterwards.
TEST(Ep, BadInputsThrowAndBufferStaysUsable) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    constexpr int T = 32, H = 1024, K = 4;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, H, K, 2));
    ASSERT_TRUE(h.alive());
    const int Le = h.local_experts();
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));

    // Device inputs for up to 2 * (T + 1) rows, valid routing (expert 0) everywhere.
    DevMem tok, idx32, idx64, w, w64, big;
    tok.ensure(size_t{2} * (T + 1) * H * 2);
    idx32.ensure(size_t{2} * (T + 1) * K * 4);
    idx64.ensure(size_t{2} * (T + 1) * K * 8);
    w.ensure(size_t{2} * (T + 1) * K * 4);
    w64.ensure(size_t{2} * (T + 1) * K * 8);
    CK(cudaMemset(tok.get(), 0, tok.size()));
    CK(cudaMemset(idx32.get(), 0, idx32.size()));
    CK(cudaMemset(idx64.get(), 0, idx64.size()));
    CK(cudaMemset(w.get(), 0, w.size()));
    CK(cudaMemset(w64.get(), 0, w64.size()));
    std::vector<uint16_t> host_tokens(static_cast<size_t>(T) * H);
    std::vector<int32_t> host_idx(static_cast<size_t>(T) * K, 0);
    const int n = T;
    const TensorView good_tok(tok.get(), DataType::kBFloat16, {n, H});
    const TensorView good_idx(idx32.get(), DataType::kInt32, {n, K});
    const TensorView good_w(w.get(), DataType::kFloat32, {n, K});
    auto dispatch_throws = [&](const TensorView& t, const TensorView& i, const TensorView& wt, const TensorView& sc,
                               const std::vector<std::string>& names, const char* label) {
      SCOPED_TRACE(label);
      const std::string msg = error_message<ferry::InvalidArgument>(
          [&] { return h.buf().dispatch(t, i, wt, sc, h.stream()).num_rows; });
      bool named = names.empty();
      for (const std::string& nm : names) named = named || contains_ci(user_part(msg), nm);
      EXPECT_TRUE(named) << "message should name " << ::testing::PrintToString(names) << ": " << msg;
    };
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {T + 1, H}), TensorView(idx32.get(), DataType::kInt32, {T + 1, K}),
                    TensorView(w.get(), DataType::kFloat32, {T + 1, K}), {}, {"tokens"}, "more tokens than max_tokens_per_rank");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat32, {n, H}), good_idx, good_w, {}, {"tokens"}, "fp32 tokens");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat16, {n, H}), good_idx, good_w, {}, {"tokens"}, "fp16 tokens");
    dispatch_throws(good_tok, good_idx, TensorView(w64.get(), DataType::kFloat64, {n, K}), {}, {"weights"}, "fp64 weights");
    dispatch_throws(good_tok, TensorView(w.get(), DataType::kFloat32, {n, K}), good_w, {}, {"topk_idx"}, "fp32 topk_idx");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {n, H - 128}), good_idx, good_w, {}, {"tokens", "hidden"},
                    "hidden mismatch");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {n, K - 1}), TensorView(w.get(), DataType::kFloat32, {n, K - 1}),
                    {}, {"topk"}, "topk mismatch");
    dispatch_throws(good_tok, good_idx, TensorView(w.get(), DataType::kFloat32, {n, K + 1}), {}, {"weights"}, "weights topk mismatch");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {n - 1, K}), good_w, {}, {"topk_idx", "tokens"},
                    "topk_idx rows mismatch");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {int64_t{n} * H}), good_idx, good_w, {}, {"tokens"}, "1-D tokens");
    dispatch_throws(good_tok, TensorView(idx32.get(), DataType::kInt32, {int64_t{n} * K}), good_w, {}, {"topk_idx"}, "1-D topk_idx");
    dispatch_throws(TensorView(tok.get(), DataType::kBFloat16, {n, H}, {2 * H, 1}), good_idx, good_w, {}, {"tokens"},
                    "non-contiguous tokens");
    dispatch_throws(good_tok, TensorView(idx64.get(), DataType::kInt64, {n, K}, {1, n}), good_w, {}, {"topk_idx"},
                    "transposed topk_idx");
    dispatch_throws(good_tok, good_idx, TensorView(w.get(), DataType::kFloat32, {n, K}, {2 * K, 1}), {}, {"weights"},
                    "non-contiguous weights");
    dispatch_throws(TensorView(host_tokens.data(), DataType::kBFloat16, {n, H}), good_idx, good_w, {}, {"device"},
                    "host tokens");
    dispatch_throws(good_tok, TensorView(host_idx.data(), DataType::kInt32, {n, K}), good_w, {}, {"device"}, "host topk_idx");
    dispatch_throws(TensorView(), good_idx, good_w, {}, {"tokens"}, "no tokens");
    dispatch_throws(good_tok, TensorView(), good_w, {}, {"topk_idx"}, "no topk_idx (not reusing)");
    dispatch_throws(good_tok, good_idx, TensorView(), {}, {"weights"}, "weights missing with with_weights");
    dispatch_throws(TensorView(tok.get(), DataType::kFloat8E4M3, {n, H}), good_idx, good_w,
                    TensorView(w.get(), DataType::kFloat32, {n, H / 128}), {}, "fp8 tokens with a bf16 dispatch_type");

    // Bad combines between a good dispatch and its (good) combine.
    Harness::Options o;
    o.before_combine = [&](const DispatchResult& r, const TensorView& ev, const TensorView& out) {
      auto combine_throws = [&](const TensorView& e, const TensorView& ot, const char* name, bool word, const char* label) {
        SCOPED_TRACE(label);
        const std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().combine(e, r.handle, ot, h.stream()); });
        EXPECT_TRUE(word ? names_word(msg, name) : contains_ci(user_part(msg), name)) << "should name " << name << ": " << msg;
      };
      const std::vector<int64_t> shape = ev.shape;
      combine_throws(TensorView(ev.data, DataType::kFloat32, shape), out, "expert_outputs", false, "fp32 expert_outputs");
      std::vector<int64_t> narrow = shape;
      narrow.back() = H - 128;
      combine_throws(TensorView(ev.data, DataType::kBFloat16, narrow), out, "expert_outputs", false, "expert_outputs hidden");
      if (mode == EpMode::kLowLatency) {
        std::vector<int64_t> fewer = shape;
        fewer[1] -= 1;
        combine_throws(TensorView(ev.data, DataType::kBFloat16, fewer), out, "expert_outputs", false, "capacity mismatch");
        combine_throws(TensorView(ev.data, DataType::kBFloat16, {Le + 1, shape[1], H}), out, "expert_outputs", false,
                       "local experts mismatch");
      } else if (r.num_rows > 0) {
        combine_throws(TensorView(ev.data, DataType::kBFloat16, {r.num_rows - 1, H}), out, "expert_outputs", false,
                       "fewer rows than dispatched");
      }
      combine_throws(TensorView(), out, "expert_outputs", false, "no expert_outputs");
      combine_throws(ev, TensorView(out.data, DataType::kFloat32, {n, H}), "out", true, "fp32 out");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n + 1, H}), "out", true, "out rows mismatch");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n, H / 2}), "out", true, "out hidden mismatch");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {int64_t{n} * H}), "out", true, "1-D out");
      combine_throws(ev, TensorView(out.data, DataType::kBFloat16, {n, H}, {2 * H, 1}), "out", true, "non-contiguous out");
      combine_throws(ev, TensorView(host_tokens.data(), DataType::kBFloat16, {n, H}), "device", false, "host out");
    };
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
    ASSERT_TRUE(h.round(s, ep::make_all_inputs(s), o));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

// A buffer without weights rejects them; it works without.
TEST(Ep, WeightsGivenWithoutWithWeights) {
  REQUIRE_EP();
  for (EpMode mode : kModes) {
    SCOPED_TRACE(mode_id(mode));
    constexpr int T = 16, H = 512, K = 2;
    Harness h(shared(), make_config(mode, DataType::kBFloat16, T, H, K, 2, /*with_weights=*/false));
    ASSERT_TRUE(h.alive());
    DevMem tok, idx, w;
    tok.ensure(size_t{T} * H * 2);
    idx.ensure(size_t{T} * K * 4);
    w.ensure(size_t{T} * K * 4);
    CK(cudaMemset(tok.get(), 0, tok.size()));
    CK(cudaMemset(idx.get(), 0, idx.size()));
    CK(cudaMemset(w.get(), 0, w.size()));
    const std::string msg = error_message<ferry::InvalidArgument>([&] {
      return h.buf()
          .dispatch(TensorView(tok.get(), DataType::kBFloat16, {T, H}), TensorView(idx.get(), DataType::kInt32, {T, K}),
                    TensorView(w.get(), DataType::kFloat32, {T, K}), TensorView(), h.stream())
          .num_rows;
    });
    EXPECT_TRUE(contains_ci(user_part(msg), "weights")) << msg;
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

// An expert id >= num_experts on rank 0 only, detected on the device.
//  - high-throughput with sync_counts: rank 0's dispatch throws; the other ranks
//    return, having received nothing from rank 0;
//  - high-throughput without sync_counts, low-latency: the error surfaces in
//    check_errors() after a stream synchronization (once), or in rank 0's next call.
// Then every rank runs a correct round on the same buffer.
TEST(Ep, BadExpertIdOnOneRank) {
  REQUIRE_EP();
  const int me = mpi_rank();
  struct Variant {
    EpMode mode;
    bool sync_counts;
    bool next_call_raises;  // else check_errors()
    bool repeated = false;  // a token naming one expert twice instead of an id out of range
  };
  for (const Variant v : {Variant{EpMode::kHighThroughput, true, false}, Variant{EpMode::kHighThroughput, false, false},
                          Variant{EpMode::kLowLatency, true, false}, Variant{EpMode::kLowLatency, true, true},
                          Variant{EpMode::kHighThroughput, true, false, true},
                          Variant{EpMode::kLowLatency, true, false, true}}) {
    SCOPED_TRACE(std::string(mode_id(v.mode)) + (v.sync_counts ? " sync" : " no-sync") +
                 (v.next_call_raises ? " next call" : " check_errors") + (v.repeated ? " repeated" : " out of range"));
    Harness h(shared(), make_config(v.mode, DataType::kBFloat16, 32, 1024, 4, 2));
    ASSERT_TRUE(h.alive());
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
    const int E = h.config().num_experts;
    const ep::Spec s = make_spec(h.config(), shared().next_seed(), ep::Routing::kUniform, ep::TokenCounts::kFull);
    auto all = ep::make_all_inputs(s);
    ep::RankInput bad = all[0];
    if (v.repeated) {
      bad.idx[1] = bad.idx[0] >= 0 ? bad.idx[0] : 0;  // token 0 names one expert twice
      bad.idx[0] = bad.idx[1];
    } else {
      bad.idx[1] = E;                              // token 0, slot 1
      bad.idx[bad.idx.size() - 1] = E + 1000;      // last token, last slot
    }
    const ep::RankInput& mine = me == 0 ? bad : all[me];
    const int n = mine.num_tokens;
    DispatchOptions dopt;
    dopt.sync_counts = v.sync_counts;
    std::string error;
    DispatchResult r;
    bool threw = false;
    try {
      h.upload(s, mine, false);
      h.poison_previous();
      try {
        r = h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(), h.stream(), dopt);
      } catch (const ferry::InvalidArgument& e) {
        threw = true;
        if (me == 0) {
          EXPECT_TRUE(contains_ci(user_part(e.what()), "expert")) << e.what();
        }
      }
      CK(cudaStreamSynchronize(h.stream()));
      const bool expect_throw_now = me == 0 && v.mode == EpMode::kHighThroughput && v.sync_counts;
      EXPECT_EQ(threw, expect_throw_now) << "dispatch with an out-of-range expert on rank 0";
      if (!expect_throw_now && me == 0) {
        if (v.next_call_raises) {
          const auto good = all[0];
          h.upload(s, good, false);
          error_message<ferry::InvalidArgument>([&] {
            return h.buf().dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n), TensorView(), h.stream()).num_rows;
          });
        } else {
          const std::string msg = error_message<ferry::InvalidArgument>([&] { h.buf().check_errors(); });
          EXPECT_TRUE(contains_ci(user_part(msg), "expert")) << msg;
        }
      }
      // Reported once; the other ranks have nothing to report.
      EXPECT_NO_THROW(h.buf().check_errors());
      if (me != 0 && v.mode == EpMode::kHighThroughput && v.sync_counts) {
        // Nothing arrived from rank 0.
        auto without0 = all;
        without0[0] = ep::RankInput{};
        without0[0].num_tokens = 0;
        const Received rx = fetch(r, h.config(), h.local_experts(), h.stream());
        DispatchExpect ex;
        ex.sync_counts = true;
        ep::Spec s0 = s;
        verify_dispatch(r, rx, h.config(), s0, without0, ex, "peers of the rank with a bad expert id");
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << error;
    ASSERT_TRUE(all_ranks(error.empty()));
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
    ASSERT_TRUE(run_case(h, ep::Routing::kDrops, ep::TokenCounts::kFull));
  }
}

// ---------------------------------------------------------------- CUDA graphs
// Low-latency rounds captured once and replayed with new routing and tokens
// written into the same input buffers before each replay:
//  A: bf16, send/recv halves, expert outputs = the dispatch output itself, so
//     out[t] = sum_k w_k x_t;
//  B: fp8 dispatch with dispatch()/combine(), expert outputs precomputed on the
//     host (at the reference rows, every other row NaN) before each replay.
TEST(Ep, LowLatencyGraphReplayWithNewRouting) {
  REQUIRE_EP();
  const int me = mpi_rank();
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "graph A (halves, identity experts)" : "graph B (fp8, precomputed experts)");
    const EpConfig cfg = variant == 0 ? make_config(EpMode::kLowLatency, DataType::kBFloat16, 64, 2048, 6, 4)
                                      : make_config(EpMode::kLowLatency, DataType::kFloat8E4M3, 48, 4096, 4, 3);
    Harness h(shared(), cfg);
    ASSERT_TRUE(h.alive());
    const int T = cfg.max_tokens_per_rank, H = cfg.hidden, Le = h.local_experts();
    const int64_t cap = static_cast<int64_t>(mpi_size()) * T;
    auto spec_for = [&](uint64_t seed) {
      return make_spec(cfg, seed, variant == 0 ? ep::Routing::kDrops : ep::Routing::kZipf, ep::TokenCounts::kFull);
    };
    h.expert_out_mem().ensure(static_cast<size_t>(Le * cap) * H * 2);
    cudaGraphExec_t exec = nullptr;
    DispatchResult captured;
    std::string error;
    try {
      const ep::Spec s0 = spec_for(shared().next_seed());
      h.upload(s0, ep::make_input(s0, me), variant == 1);
      cudaGraph_t graph = nullptr;
      CK(cudaStreamBeginCapture(h.stream(), cudaStreamCaptureModeGlobal));
      try {
        const bool i64 = variant == 1;
        if (variant == 0) {
          const EpHandle hd = h.buf().dispatch_send(h.tokens_view(s0, T), h.idx_view(s0, T, i64), h.weights_view(s0, T),
                                                    TensorView(), h.stream());
          captured = h.buf().dispatch_recv(hd, h.stream());
          h.buf().combine_send(h.expert_view(captured, captured.tokens, false), captured.handle, h.stream());
          h.buf().combine_recv(captured.handle, h.out_view(T), h.stream());
        } else {
          captured = h.buf().dispatch(h.tokens_view(s0, T), h.idx_view(s0, T, i64), h.weights_view(s0, T), TensorView(),
                                      h.stream());
          h.buf().combine(h.expert_view(captured, h.expert_out_mem().get(), false), captured.handle, h.out_view(T), h.stream());
        }
      } catch (...) {
        cudaStreamEndCapture(h.stream(), &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      CK(cudaStreamEndCapture(h.stream(), &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      CK(cudaGraphDestroy(graph));
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_TRUE(error.empty()) << "capture failed: " << error;
    bool alive = all_ranks(error.empty());
    for (int rep = 0; alive && rep < 6; ++rep) {
      SCOPED_TRACE("replay " + std::to_string(rep));
      const ep::Spec s = spec_for(shared().next_seed());
      const auto all = ep::make_all_inputs(s);
      const std::string what = describe(cfg, s) + " graph replay " + std::to_string(rep);
      std::vector<uint16_t> out;
      std::vector<uint8_t> guard;
      Received rx;
      try {
        h.upload(s, all[me], variant == 1);
        if (variant == 1) {
          // Expert outputs at the rows the contract prescribes for this routing.
          const ep::Layout ref = ep::reference_layout(s, all, me, 0);
          std::vector<uint16_t> y(static_cast<size_t>(Le * cap) * H, 0xFFFF);
          for (int le = 0; le < Le; ++le)
            for (size_t i = 0; i < ref.rows[le].size(); ++i) {
              const ep::Entry& e = ref.rows[le][i];
              const size_t row = static_cast<size_t>(le * cap) + i;
              for (int c = 0; c < H; ++c)
                y[row * H + c] = ep::stand_in(all[e.src_rank].value(s, e.src_token, c), static_cast<int64_t>(me) * Le + le);
            }
          CK(cudaMemcpyAsync(h.expert_out_mem().get(), y.data(), y.size() * 2, cudaMemcpyHostToDevice, h.stream()));
          CK(cudaStreamSynchronize(h.stream()));
        }
        h.poison_out();
        h.remember(captured);
        h.poison_previous();  // the captured dispatch output, on every rank before anyone replays
        CK(cudaGraphLaunch(exec, h.stream()));
        shared().comm->synchronize(h.stream());
        rx = fetch(captured, cfg, Le, h.stream());
        h.fetch_out(T, &out, &guard);
      } catch (const std::exception& e) {
        error = e.what();
      }
      EXPECT_TRUE(error.empty()) << error << "\n  " << what;
      alive = all_ranks(error.empty());
      if (!alive) break;
      DispatchExpect ex;
      ex.sync_counts = false;
      // The handle captured reports the capture's token count (T, as every replay).
      verify_dispatch(captured, rx, cfg, s, all, ex, what);
      const ep::ExpertKind kind = variant == 0 ? ep::ExpertKind::kIdentity : ep::ExpertKind::kStandIn;
      verify_combine(out, guard, ep::combine_reference(s, all[me], kind), T, H, what);
    }
    if (exec) cudaGraphExecDestroy(exec);
    EXPECT_TRUE(alive);
    ASSERT_TRUE(all_ranks(alive));
    // Eager calls still work on the buffer after the replays.
    ASSERT_TRUE(run_case(h, ep::Routing::kUniform, ep::TokenCounts::kVaried));
  }
}

// ---------------------------------------------------------------- long sequences
// `calls` back-to-back dispatch+combine rounds on one stream, cycling through 4
// input sets resident on the device (different token counts and routing), the
// dispatch output fed straight back as the expert outputs; no host
// synchronization except at the checked calls (the first and every `every`-th),
// where the dispatch rows, counts and the combine output are verified.
void back_to_back(EpMode mode, int calls, int every) {
  const int me = mpi_rank();
  const EpConfig cfg = make_config(mode, DataType::kBFloat16, 32, 2048, 8, 4);
  Harness h(shared(), cfg);
  ASSERT_TRUE(h.alive());
  const int H = cfg.hidden, K = cfg.topk;
  constexpr int kSets = 4;
  std::vector<ep::Spec> specs;
  std::vector<std::vector<ep::RankInput>> inputs;
  DevMem tok[kSets], idx[kSets], w[kSets];
  const ep::Routing routings[kSets] = {ep::Routing::kDrops, ep::Routing::kUniform, ep::Routing::kZipf, ep::Routing::kOneRank};
  for (int i = 0; i < kSets; ++i) {
    specs.push_back(make_spec(cfg, shared().next_seed(), routings[i], i == 1 ? ep::TokenCounts::kSomeZero : ep::TokenCounts::kVaried,
                              false, i % mpi_size()));
    inputs.push_back(ep::make_all_inputs(specs[i]));
    const ep::RankInput& in = inputs[i][me];
    const size_t n = static_cast<size_t>(in.num_tokens);
    tok[i].ensure(n * H * 2);
    idx[i].ensure(n * K * 8);
    w[i].ensure(n * K * 4);
    if (n) {
      CK(cudaMemcpy(tok[i].get(), in.x.data(), n * H * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(idx[i].get(), in.idx.data(), n * K * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(w[i].get(), in.weights.data(), n * K * 4, cudaMemcpyHostToDevice));
    }
  }
  std::string error;
  int checked = 0;
  for (int c = 0; c < calls; ++c) {
    const int set = c % kSets;
    const ep::Spec& s = specs[set];
    const int n = inputs[set][me].num_tokens;
    const bool check = c == 0 || (c + 1) % every == 0;
    DispatchResult r;
    std::vector<uint16_t> out;
    std::vector<uint8_t> guard;
    Received rx;
    if (error.empty()) {
      try {
        if (check) h.poison_out();
        const TensorView tv(tok[set].get(), DataType::kBFloat16, {n, H});
        const TensorView iv(idx[set].get(), DataType::kInt64, {n, K});
        const TensorView wv(w[set].get(), DataType::kFloat32, {n, K});
        DispatchOptions dopt;
        dopt.sync_counts = false;
        if (c % 2 == 1) {
          const EpHandle hd = h.buf().dispatch_send(tv, iv, wv, TensorView(), h.stream(), dopt);
          r = h.buf().dispatch_recv(hd, h.stream(), dopt);
          h.buf().combine_send(h.expert_view(r, r.tokens, false), r.handle, h.stream());
          h.buf().combine_recv(r.handle, h.out_view(n), h.stream());
        } else {
          r = h.buf().dispatch(tv, iv, wv, TensorView(), h.stream(), dopt);
          h.buf().combine(h.expert_view(r, r.tokens, false), r.handle, h.out_view(n), h.stream());
        }
        if (check) {
          shared().comm->synchronize(h.stream());
          rx = fetch(r, cfg, h.local_experts(), h.stream());
          h.fetch_out(n, &out, &guard);
        }
      } catch (const std::exception& e) {
        error = e.what() + std::string(" (call ") + std::to_string(c) + ")";
      }
    }
    if (!check) continue;
    if (!all_ranks(error.empty())) break;
    const std::string what = describe(cfg, s) + " call " + std::to_string(c);
    DispatchExpect ex;
    ex.sync_counts = false;
    verify_dispatch(r, rx, cfg, s, inputs[set], ex, what);
    verify_combine(out, guard, ep::combine_reference(s, inputs[set][me], ep::ExpertKind::kIdentity), n, H, what);
    ++checked;
    if (!all_ranks(!::testing::Test::HasFailure())) break;  // one failing check is enough (decided together)
  }
  EXPECT_TRUE(error.empty()) << error;
  cudaStreamSynchronize(h.stream());
  EXPECT_EQ(checked, calls / every + 1) << "checked calls";
}

TEST(Ep, LowLatencyBackToBack1000) {
  REQUIRE_EP();
  back_to_back(EpMode::kLowLatency, 1000, 100);
}

TEST(Ep, HighThroughputBackToBackWithoutSync) {
  REQUIRE_EP();
  back_to_back(EpMode::kHighThroughput, 200, 50);
}

}  // namespace
