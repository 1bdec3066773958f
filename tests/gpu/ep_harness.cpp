// Definitions of the EP test harness (ep_harness.hpp): the one Shared of the
// program and its teardown, configs and problems, Harness (the read-back and checks: ep_harness_checks.cpp).
#include "gpu/ep_harness.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/host_types.hpp"
#include "common/knobs.hpp"
#include "common/test_util.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"

namespace ferry::testing::ep_gpu {

namespace {

constexpr size_t kGuard = 4096;  // poisoned bytes checked after the combine output

// ---------------------------------------------------------------- shared state
std::unique_ptr<Shared>& shared_slot() {
  static std::unique_ptr<Shared> s;
  return s;
}
}  // namespace

Shared& shared() {
  auto& s = shared_slot();
  if (s) return *s;
  s = std::make_unique<Shared>();
  s->comm = std::make_unique<ferry::Communicator>(std::make_shared<ferry::MpiBootstrap>());
  CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  s->seed = ferry::testing::broadcast_test_seed("ep");
  return *s;
}

namespace {
[[maybe_unused]] ::testing::Environment* const kEnv =
    ::testing::AddGlobalTestEnvironment(new ferry::testing::TearDownEnvironment([] { shared_slot().reset(); }));

// E = world * Le, Le raised so that K <= E.
int experts_for(int world, int le, int topk) {
  while (world * le < topk) ++le;
  return world * le;
}

const char* routing_id(ep::Routing r) {
  return std::array{"uniform", "drops", "zipf", "one_expert", "one_rank", "none"}[static_cast<int>(r)];
}
const char* counts_id(ep::TokenCounts c) {
  return std::array{"full", "varied", "some_zero", "only_rank0", "all_zero"}[static_cast<int>(c)];
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
}  // namespace

// ---------------------------------------------------------------- configs and problems
const char* mode_id(EpMode m) { return m == EpMode::kHighThroughput ? "ht" : "ll"; }
const char* dtype_id(DataType t) { return t == DataType::kFloat8E4M3 ? "fp8" : "bf16"; }
bool expect_hierarchical(const Communicator& comm, EpMode mode) {
  // The default; FERRY_EP_HIERARCHICAL=0 turns it off.
  const std::optional<bool> v = ferry::knobs::kEpHierarchical.read();
  const bool off = v.has_value() && !*v;
  const Topology& t = comm.topology();
  return !off && mode == EpMode::kHighThroughput && t.num_nodes > 1 && t.ranks_per_node > 1;
}

EpConfig make_config(EpMode mode, DataType dispatch_type, int tokens, int hidden, int topk, int local_experts,
                     bool with_weights, int alignment) {
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
                   bool fp8_input, int hot) {
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

std::string describe(const EpConfig& c, const ep::Spec& s) {
  std::ostringstream os;
  os << mode_id(c.mode) << " " << dtype_id(c.dispatch_type) << (s.fp8_input ? " (fp8 input)" : "") << " T "
     << c.max_tokens_per_rank << " H " << c.hidden << " K " << c.topk << " E " << c.num_experts << " align "
     << c.expert_alignment << (c.with_weights ? " weights" : " no-weights") << " routing " << routing_id(s.routing)
     << " counts " << counts_id(s.counts) << " seed " << s.seed << " (rank " << mpi_rank() << " of " << mpi_size()
     << ")";
  return os.str();
}

// ---------------------------------------------------------------- one EpBuffer and its I/O buffers
Harness::Harness(Shared& s, const EpConfig& cfg) : s_(s), cfg_(cfg) {
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
    // The path: the NVLink kernels on one node, the cross-node path otherwise.
    EXPECT_EQ(buf_->spans_nodes(), s.comm->topology().num_nodes > 1);
    // The hierarchical cross-node path for high-throughput on nodes of several
    // ranks (NOTE [EP hierarchical]), unless FERRY_EP_HIERARCHICAL=0; the direct one otherwise.
    EXPECT_EQ(buf_->hierarchical(), expect_hierarchical(*s.comm, cfg.mode));
  }
}

Harness::~Harness() {
  if (s_.stream) cudaStreamSynchronize(s_.stream);
  buf_.reset();
}

void Harness::upload(const ep::Spec& s, const ep::RankInput& in, bool idx64) {
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

DispatchResult Harness::unsynced_identity_round(const void* tokens, const void* idx, const void* weights, int n,
                                               bool halves) {
  const int H = cfg_.hidden, K = cfg_.topk;
  const TensorView tv(tokens, DataType::kBFloat16, {n, H});
  const TensorView iv(idx, DataType::kInt64, {n, K});
  const TensorView wv(weights, DataType::kFloat32, {n, K});
  DispatchOptions dopt;
  dopt.sync_counts = false;
  DispatchResult r;
  if (halves) {
    const EpHandle hd = buf().dispatch_send(tv, iv, wv, TensorView(), stream(), dopt);
    r = buf().dispatch_recv(hd, stream(), dopt);
    buf().combine_send(expert_view(r, r.tokens, false), r.handle, stream());
    buf().combine_recv(r.handle, out_view(n), stream());
  } else {
    r = buf().dispatch(tv, iv, wv, TensorView(), stream(), dopt);
    buf().combine(expert_view(r, r.tokens, false), r.handle, out_view(n), stream());
  }
  return r;
}

void Harness::poison_previous() {
  if (prev_.tokens) {
    const size_t rows = static_cast<size_t>(prev_.capacity_rows), H = static_cast<size_t>(cfg_.hidden);
    CK(cudaMemsetAsync(prev_.tokens, 0xFF, rows * H * dispatch_elem(cfg_), s_.stream));
    if (prev_.scales) CK(cudaMemsetAsync(prev_.scales, 0xFF, rows * (H / ep::kScaleGroup) * 4, s_.stream));
    if (prev_.weights) CK(cudaMemsetAsync(prev_.weights, 0xFF, rows * 4, s_.stream));
  }
  CK(cudaStreamSynchronize(s_.stream));
  MPI_Barrier(MPI_COMM_WORLD);
}

void Harness::run_stand_in(const DispatchResult& r, const Received& rx) {
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

void Harness::fetch_out(int n, std::vector<uint16_t>* out, std::vector<uint8_t>* guard) {
  const size_t bytes = static_cast<size_t>(n) * cfg_.hidden * 2;
  out->assign(bytes / 2, 0);
  guard->assign(kGuard, 0);
  if (bytes) CK(cudaMemcpyAsync(out->data(), out_.get(), bytes, cudaMemcpyDeviceToHost, s_.stream));
  CK(cudaMemcpyAsync(guard->data(), out_.bytes() + bytes, kGuard, cudaMemcpyDeviceToHost, s_.stream));
  CK(cudaStreamSynchronize(s_.stream));
}

void Harness::verify_inputs_unchanged(const ep::Spec& s, const ep::RankInput& in, bool idx64, bool check_idx,
                                      const std::string& what) {
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

EpHandle route_on_side_stream(EpBuffer& buf, const TensorView& idx, cudaStream_t stream) {
  cudaStream_t side;
  cudaEvent_t ready, routed;
  CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&routed, cudaEventDisableTiming));
  CK(cudaEventRecord(ready, stream));  // the inputs uploaded on `stream`, the previous combine done
  CK(cudaStreamWaitEvent(side, ready, 0));
  EpHandle handle;
  std::string error;
  try {
    handle = buf.route(idx, side);
  } catch (const std::exception& e) {
    error = e.what();
  }
  CK(cudaEventRecord(routed, side));
  CK(cudaStreamWaitEvent(stream, routed, 0));
  CK(cudaEventDestroy(ready));
  CK(cudaEventDestroy(routed));
  CK(cudaStreamDestroy(side));  // released once its work is done
  if (!error.empty()) throw std::runtime_error("EpBuffer::route threw: " + error);
  return handle;
}

bool Harness::round(const ep::Spec& s, const std::vector<ep::RankInput>& all, const Options& o, Outcome* outcome) {
  const int me = mpi_rank();
  const ep::RankInput& mine = all[me];
  const int n = mine.num_tokens;
  const std::string what = describe(cfg_, s) + (o.idx64 ? " idx int64" : " idx int32") +
                           (o.halves ? " send/recv halves" : "") + (o.sync_counts ? "" : " sync_counts=false") +
                           (o.reuse ? " reuse" : "") + (o.route_ahead ? " route ahead" : "");
  DispatchResult r;
  std::string error;
  try {
    upload(s, mine, o.idx64);
    if (o.poison) poison_previous();
    DispatchOptions dopt;
    dopt.sync_counts = o.sync_counts;
    dopt.reuse = o.reuse;
    EpHandle routed;
    if (o.route_ahead) {
      routed = route_on_side_stream(*buf_, idx_view(s, n, o.idx64), s_.stream);
      dopt.reuse = &routed;
    }
    const TensorView idx = dopt.reuse && !o.reuse_passes_idx ? TensorView() : idx_view(s, n, o.idx64);
    if (o.halves) {
      const EpHandle h = buf_->dispatch_send(tokens_view(s, n), idx, weights_view(s, n), scales_view(s, n), s_.stream, dopt);
      r = buf_->dispatch_recv(h, s_.stream, dopt);
      EXPECT_EQ(r.handle.generation, h.generation) << what;
    } else {
      r = buf_->dispatch(tokens_view(s, n), idx, weights_view(s, n), scales_view(s, n), s_.stream, dopt);
    }
    if (o.route_ahead) EXPECT_EQ(r.handle.generation, routed.generation) << what;
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
  const uint64_t ohash = verify_combine(out, guard, ep::combine_reference(s, mine, kind, buf_->hierarchical()), n,
                                        cfg_.hidden, what);
  verify_inputs_unchanged(s, mine, o.idx64, !o.reuse || o.reuse_passes_idx, what);
  if (outcome) *outcome = Outcome{dhash, ohash, r.handle};
  return true;
}

bool run_case(Harness& h, ep::Routing routing, ep::TokenCounts counts, const Harness::Options& o, bool fp8_input,
              int hot, Harness::Outcome* outcome) {
  const ep::Spec s = make_spec(h.config(), shared().next_seed(), routing, counts, fp8_input, hot);
  return h.round(s, ep::make_all_inputs(s), o, outcome);
}

}  // namespace ferry::testing::ep_gpu
