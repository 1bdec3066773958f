#include "ep/ep_args.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "ep/ep_call_state.hpp"
#include "ep/ep_params.hpp"
#include "ferry/error.hpp"

namespace ferry {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorView::is_contiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  if (!is_contiguous()) os << " (non-contiguous)";
  return os.str();
}

const char* ep_layout_name(EpLayout layout) {
  switch (layout) {
    case EpLayout::kExpanded: return "expanded";
    case EpLayout::kRankRows: return "rank_rows";
  }
  return "unknown";
}

const char* ep_mode_name(EpMode mode) {
  switch (mode) {
    case EpMode::kHighThroughput: return "high_throughput";
    case EpMode::kLowLatency: return "low_latency";
  }
  return "unknown";
}

namespace ep {
namespace {

thread_local const ArgNames* t_arg_names = nullptr;  // NOTE [EP argument names]
const ArgNames kCppArgNames{};

int local_experts_of(const EpConfig& c, int world_size) { return world_size > 0 ? c.num_experts / world_size : 0; }

std::string sizes_text(std::initializer_list<int64_t> shape) {
  std::ostringstream os;
  os << "[";
  size_t i = 0;
  for (int64_t d : shape) os << (i++ ? ", " : "") << (d < 0 ? std::string("*") : std::to_string(d));
  os << "]";
  return os.str();
}

std::string strides_text(const TensorView& t) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < t.strides.size(); ++i) os << (i ? ", " : "") << t.strides[i];
  os << "]";
  return os.str();
}

// A tensor of rows (tokens, expert outputs, out): the kernels move rows in 16-byte units (vector
// loads and stores), so its data must start on a 16-byte boundary; a misaligned one would fault
// on the GPU ("misaligned address") and take the communicator with it. PyTorch's allocations are
// aligned; a view at an odd element offset of a flat buffer is not.
void check_row_alignment(const char* where, const char* name, const TensorView& t) {
  const auto address = reinterpret_cast<uintptr_t>(t.data);
  FERRY_ARG_CHECK(address % 16 == 0, where << ": " << name << " must start at a 16-byte aligned address (rows move in "
                                           << "16-byte units); its data is " << address % 16
                                           << " bytes past a boundary (" << t.describe() << ")");
}

// A tensor argument: present, its type, rank and sizes (-1: any), contiguous.
void check_tensor(const char* where, const char* name, const TensorView& t, DataType dtype,
                  std::initializer_list<int64_t> shape) {
  FERRY_ARG_CHECK(t.given(), where << ": " << name << " is missing");
  // A null pointer is fine for a tensor with no elements (PyTorch gives those).
  FERRY_ARG_CHECK(t.data != nullptr || (!t.shape.empty() && t.numel() == 0),
                  where << ": " << name << " is null (" << t.describe() << ")");
  FERRY_ARG_CHECK(t.dtype == dtype, where << ": " << name << " must be " << dtype_name(dtype) << ", got "
                                          << t.describe());
  FERRY_ARG_CHECK(t.shape.size() == shape.size(),
                  where << ": " << name << " must have shape " << sizes_text(shape) << ", got " << t.describe());
  size_t i = 0;
  for (int64_t d : shape) {
    FERRY_ARG_CHECK(t.shape[i] >= 0, where << ": " << name << " has a negative size: " << t.describe());
    FERRY_ARG_CHECK(d < 0 || t.shape[i] == d,
                    where << ": " << name << " must have shape " << sizes_text(shape) << ", got " << t.describe());
    ++i;
  }
  FERRY_ARG_CHECK(t.is_contiguous(), where << ": " << name << " must be contiguous (row-major), got strides "
                                           << strides_text(t) << " for " << t.describe());
}

// topk_idx int32 or int64 [num_tokens, K] (num_tokens < 0: any count up to max_tokens_per_rank), contiguous;
// true for int64.
bool check_topk_idx(const CallContext& ctx, const char* where, const TensorView& idx, int64_t num_tokens) {
  const EpConfig& c = ctx.config;
  const ArgNames& n = ctx.names;
  FERRY_ARG_CHECK(idx.given(), where << ": " << n.topk_idx << " is missing");
  FERRY_ARG_CHECK(idx.dtype == DataType::kInt32 || idx.dtype == DataType::kInt64,
                  where << ": " << n.topk_idx << " must be int32 or int64, got " << idx.describe());
  check_tensor(where, n.topk_idx, idx, idx.dtype, {num_tokens, c.topk});
  FERRY_ARG_CHECK(idx.shape[0] <= c.max_tokens_per_rank, where << ": " << n.topk_idx << " has " << idx.shape[0]
                                                                << " tokens, more than " << n.max_tokens << " ("
                                                                << c.max_tokens_per_rank << ")");
  return idx.dtype == DataType::kInt64;
}

DispatchCall check_dispatch_tensors(const CallContext& ctx, const DispatchArgs& a) {
  const EpConfig& c = ctx.config;
  const ArgNames& n = ctx.names;
  const char* where = n.dispatch;
  const bool reusing = a.reuse != nullptr;
  const TensorView& tokens = a.tokens;
  DispatchCall call;
  FERRY_ARG_CHECK(tokens.given(), where << ": " << n.tokens << " is missing");
  FERRY_ARG_CHECK(tokens.dtype == DataType::kBFloat16 || tokens.dtype == DataType::kFloat8E4M3,
                  where << ": " << n.tokens << " must be bfloat16 or float8_e4m3, got " << tokens.describe());
  FERRY_ARG_CHECK(tokens.shape.size() == 2, where << ": " << n.tokens << " must be 2-D [tokens, " << c.hidden
                                                  << "], got " << tokens.describe());
  check_tensor(where, n.tokens, tokens, tokens.dtype, {-1, c.hidden});
  check_row_alignment(where, n.tokens, tokens);
  const int64_t num_tokens = tokens.shape[0];
  FERRY_ARG_CHECK(num_tokens <= c.max_tokens_per_rank, where << ": " << n.tokens << " has " << num_tokens
                                                               << " tokens, more than " << n.max_tokens << " ("
                                                               << c.max_tokens_per_rank << ")");
  call.num_tokens = static_cast<int>(num_tokens);
  if (reusing) CallState::check_reused_tokens(n, *a.reuse, call.num_tokens);

  call.fp8_input = tokens.dtype == DataType::kFloat8E4M3;
  if (call.fp8_input) {
    FERRY_ARG_CHECK(c.dispatch_type == DataType::kFloat8E4M3,
                    where << ": " << n.tokens << " is float8_e4m3, which needs " << n.dispatch_type
                          << " float8_e4m3 (it is " << dtype_name(c.dispatch_type) << ")");
    FERRY_ARG_CHECK(a.scales.given(), where << ": " << n.tokens << " is float8_e4m3, so " << n.scales << " float32"
                                            << sizes_text({num_tokens, c.hidden / kScaleBlock})
                                            << " must be given");
    check_tensor(where, n.scales, a.scales, DataType::kFloat32, {num_tokens, c.hidden / kScaleBlock});
  } else {
    FERRY_ARG_CHECK(!a.scales.given(), where << ": " << n.scales << " are only taken with float8_e4m3 " << n.tokens
                                             << ", got " << a.scales.describe());
  }
  // Reusing a layout: topk_idx may be omitted (it is ignored), but if given it must fit.
  if (!reusing || a.topk_idx.given()) call.idx_is_int64 = check_topk_idx(ctx, where, a.topk_idx, num_tokens);
  call.has_weights = a.topk_weights.given();
  if (call.has_weights) {
    FERRY_ARG_CHECK(c.with_weights, where << ": " << n.topk_weights << " given, but " << n.with_weights
                                          << " is false");
    check_tensor(where, n.topk_weights, a.topk_weights, DataType::kFloat32, {num_tokens, c.topk});
  } else {
    FERRY_ARG_CHECK(!c.with_weights, where << ": " << n.topk_weights << " is missing (" << n.with_weights
                                           << " is true)");
  }
  // Last: a tensor of the right form in the wrong place.
  check_device(where, n.tokens, tokens, ctx.device);
  check_device(where, n.scales, a.scales, ctx.device);
  if (!reusing) check_device(where, n.topk_idx, a.topk_idx, ctx.device);
  check_device(where, n.topk_weights, a.topk_weights, ctx.device);
  return call;
}

// rows_needed: high-throughput rows of the dispatch output (0: unknown).
void check_expert_outputs(const CallContext& ctx, const char* where, const TensorView& eo, int64_t rows_needed) {
  const EpConfig& c = ctx.config;
  const char* name = ctx.names.expert_outputs;
  if (c.mode == EpMode::kLowLatency) {
    const EpDims dims = ep_dims(c, ctx.world_size);
    check_tensor(where, name, eo, DataType::kBFloat16, {dims.local_experts, dims.capacity_per_expert, c.hidden});
  } else {
    check_tensor(where, name, eo, DataType::kBFloat16, {-1, c.hidden});
    FERRY_ARG_CHECK(eo.shape[0] >= rows_needed,
                    where << ": " << name << " has " << eo.shape[0] << " rows, the dispatch produced " << rows_needed);
    // The buffer also checks that the rows are its combine_input() (only it knows that address).
    FERRY_ARG_CHECK(!c.zero_copy_combine || eo.shape[0] <= zero_copy_input_rows(c, ctx.world_size),
                    where << ": with EpConfig::zero_copy_combine, " << name << " is the buffer's combine_input() of "
                          << zero_copy_input_rows(c, ctx.world_size) << " rows, got " << eo.shape[0] << " rows");
  }
  check_row_alignment(where, name, eo);
  check_device(where, name, eo, ctx.device);
}

void check_out(const CallContext& ctx, const char* where, const TensorView& out, int num_tokens) {
  const char* name = ctx.names.out;
  FERRY_ARG_CHECK(out.given() || num_tokens == 0,
                  where << ": " << name << " is missing (" << num_tokens << " tokens to combine)");
  if (!out.given()) return;
  check_tensor(where, name, out, DataType::kBFloat16, {num_tokens, ctx.config.hidden});
  check_row_alignment(where, name, out);
  check_device(where, name, out, ctx.device);
}

}  // namespace

const ArgNames& arg_names() { return t_arg_names != nullptr ? *t_arg_names : kCppArgNames; }
ScopedArgNames::ScopedArgNames(const ArgNames& names) : previous_(t_arg_names) { t_arg_names = &names; }
ScopedArgNames::~ScopedArgNames() { t_arg_names = previous_; }

EpDims ep_dims(const EpConfig& c, int world_size) {
  EpDims d;
  d.local_experts = local_experts_of(c, world_size);
  if (c.mode == EpMode::kLowLatency) {
    d.capacity_per_expert = int64_t{world_size} * c.max_tokens_per_rank;
    d.capacity_rows = d.local_experts * d.capacity_per_expert;
  } else if (c.layout == EpLayout::kRankRows) {
    // A source sends each token at most once to a rank.
    d.capacity_rows = c.max_recv_rows > 0 ? c.max_recv_rows : int64_t{world_size} * c.max_tokens_per_rank;
    d.index_capacity = worst_case_recv_rows(c, world_size);
  } else {
    d.capacity_rows = c.max_recv_rows > 0 ? c.max_recv_rows : worst_case_recv_rows(c, world_size);
  }
  return d;
}

int64_t zero_copy_input_rows(const EpConfig& config, int world_size) {
  return std::min<int64_t>(ep_dims(config, world_size).capacity_rows,
                           int64_t{world_size} * config.max_tokens_per_rank);
}

void validate_config(const EpConfig& c, int world_size) {
  FERRY_ARG_CHECK(c.max_tokens_per_rank > 0 && c.max_tokens_per_rank <= kMaxTokensPerRank,
                  "EpConfig: max_tokens_per_rank must be in [1, " << kMaxTokensPerRank << "], got "
                                                                 << c.max_tokens_per_rank);
  FERRY_ARG_CHECK(c.hidden > 0 && c.hidden % kScaleBlock == 0,
                  "EpConfig: hidden must be a positive multiple of " << kScaleBlock << ", got " << c.hidden);
  FERRY_ARG_CHECK(c.num_experts > 0, "EpConfig: num_experts must be > 0, got " << c.num_experts);
  FERRY_ARG_CHECK(c.num_experts <= kMaxExperts,
                  "EpConfig: num_experts must be <= " << kMaxExperts << ", got " << c.num_experts);
  FERRY_ARG_CHECK(c.topk >= 1 && c.topk <= kMaxTopk,
                  "EpConfig: topk must be in [1, " << kMaxTopk << "], got " << c.topk);
  FERRY_ARG_CHECK(c.topk <= c.num_experts,
                  "EpConfig: topk (" << c.topk << ") exceeds num_experts (" << c.num_experts << ")");
  FERRY_ARG_CHECK(world_size >= 1 && c.num_experts % world_size == 0,
                  "EpConfig: num_experts (" << c.num_experts << ") must be divisible by the world size ("
                                            << world_size << ")");
  FERRY_ARG_CHECK(c.dispatch_type == DataType::kBFloat16 || c.dispatch_type == DataType::kFloat8E4M3,
                  "EpConfig: dispatch_type must be bfloat16 or float8_e4m3, got " << dtype_name(c.dispatch_type));
  FERRY_ARG_CHECK(c.num_sms >= 0, "EpConfig: num_sms must be >= 0 (0 = default), got " << c.num_sms);
  FERRY_ARG_CHECK(c.expert_alignment >= 1, "EpConfig: expert_alignment must be >= 1, got " << c.expert_alignment);
  FERRY_ARG_CHECK(c.mode == EpMode::kHighThroughput || c.mode == EpMode::kLowLatency,
                  "EpConfig: unknown mode value " << static_cast<int>(c.mode));
  FERRY_ARG_CHECK(c.layout == EpLayout::kExpanded || c.layout == EpLayout::kRankRows,
                  "EpConfig: unknown layout value " << static_cast<int>(c.layout));
  FERRY_CHECK(c.layout != EpLayout::kRankRows || c.mode == EpMode::kHighThroughput, NotSupported,
              "EpConfig: layout rank_rows needs mode high_throughput (low-latency returns fixed-capacity "
              "per-expert slabs), got mode " << ep_mode_name(c.mode));
  FERRY_ARG_CHECK(c.max_recv_rows >= 0, "EpConfig: max_recv_rows must be >= 0 (0 = worst case), got "
                                            << c.max_recv_rows);
  FERRY_ARG_CHECK(!c.own_rows_first || c.layout == EpLayout::kRankRows,
                  "EpConfig: own_rows_first orders the rows of layout rank_rows, got layout " << ep_layout_name(c.layout));
  FERRY_ARG_CHECK(!c.zero_copy_combine || c.layout == EpLayout::kRankRows,
                  "EpConfig: zero_copy_combine reads the rows of layout rank_rows, got layout "
                      << ep_layout_name(c.layout));
  // NOTE [EP own rows first]: the copy engine writes the call's T' own rows at row 0 before any count is known.
  FERRY_ARG_CHECK(!c.own_rows_first || c.max_recv_rows == 0 || c.max_recv_rows >= c.max_tokens_per_rank,
                  "EpConfig: with own_rows_first every call's own tokens are rows, so max_recv_rows ("
                      << c.max_recv_rows << ") must be 0 or at least max_tokens_per_rank (" << c.max_tokens_per_rank
                      << ")");
  const int64_t rows = worst_case_recv_rows(c, world_size);
  FERRY_ARG_CHECK(rows < (int64_t{1} << 31), "EpConfig: the dispatch output would need " << rows
                                                 << " rows (more than 2^31); lower max_tokens_per_rank");
}

int64_t worst_case_recv_rows(const EpConfig& c, int world_size) {
  const int64_t local = local_experts_of(c, world_size);
  return int64_t{world_size} * c.max_tokens_per_rank * std::min<int64_t>(c.topk, local) +
         local * (c.expert_alignment - 1);
}

void check_device(const char* where, const char* name, const TensorView& t, const DeviceRule& rule) {
  if (rule.device < 0 || rule.locate == nullptr || t.data == nullptr || t.numel() == 0) return;
  const int got = rule.locate(t.data);
  FERRY_ARG_CHECK(got == rule.device,
                  where << ": " << name << " must be memory of CUDA device " << rule.device
                        << " (the communicator's), got "
                        << (got < 0 ? std::string("host memory") : "memory of CUDA device " + std::to_string(got)));
}

DispatchCall validate_dispatch(const CallContext& ctx, const CallState& calls, const DispatchArgs& args) {
  calls.check_dispatch_send(ctx.names, args.reuse);
  return check_dispatch_tensors(ctx, args);
}

DispatchCall validate_route(const CallContext& ctx, const CallState& calls, const TensorView& topk_idx) {
  const char* where = ctx.names.route;
  calls.check_not_half_done(where);
  DispatchCall call;
  call.idx_is_int64 = check_topk_idx(ctx, where, topk_idx, -1);
  call.num_tokens = static_cast<int>(topk_idx.shape[0]);
  check_device(where, ctx.names.topk_idx, topk_idx, ctx.device);
  return call;
}

void validate_dispatch_recv(const CallContext& ctx, const CallState& calls, const EpHandle& handle) {
  calls.check_dispatch_recv(ctx.names, handle);
}

void validate_combine_send(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                           const TensorView& expert_outputs) {
  calls.check_combine_send(ctx.names, handle);
  check_expert_outputs(ctx, ctx.names.combine, expert_outputs, std::max<int64_t>(calls.synced_rows(), 0));
}

void validate_combine_recv(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                           const TensorView& out) {
  calls.check_combine_recv(ctx.names, handle);
  check_out(ctx, ctx.names.combine_recv, out, calls.num_tokens());
}

void validate_combine(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                      const TensorView& expert_outputs, const TensorView& out) {
  validate_combine_send(ctx, calls, handle, expert_outputs);
  check_out(ctx, ctx.names.combine, out, calls.num_tokens());
}

DispatchCall validate_dispatch_args(const CallContext& ctx, const DispatchArgs& args) {
  return validate_dispatch(ctx, CallState{}, args);
}

void validate_combine_args(const CallContext& ctx, int num_tokens, int64_t num_rows,
                           const TensorView& expert_outputs, const TensorView& out) {
  CallState calls;
  const EpHandle handle = calls.dispatch_send_done(false, num_tokens, ctx.config.with_weights);
  calls.dispatch_recv_done();
  if (num_rows >= 0) calls.set_synced_rows(num_rows);
  if (out.given())
    validate_combine(ctx, calls, handle, expert_outputs, out);
  else
    validate_combine_send(ctx, calls, handle, expert_outputs);
}

}  // namespace ep

void validate_ep_config(const EpConfig& config, int world_size) { ep::validate_config(config, world_size); }

}  // namespace ferry
