#include "ep/validate.hpp"

#include <algorithm>
#include <sstream>

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

const char* ep_mode_name(EpMode mode) {
  switch (mode) {
    case EpMode::kHighThroughput: return "high_throughput";
    case EpMode::kLowLatency: return "low_latency";
  }
  return "unknown";
}

namespace ep {
namespace {

// Checks a tensor argument's type, rank, sizes (-1: any) and contiguity.
void check_tensor(const char* where, const char* name, const TensorView& t, DataType dtype,
                  std::initializer_list<int64_t> shape) {
  // A null pointer is fine for a tensor with no elements (PyTorch gives those).
  FERRY_ARG_CHECK(t.data != nullptr || (!t.shape.empty() && t.numel() == 0), where << ": " << name << " is null");
  FERRY_ARG_CHECK(t.dtype == dtype, where << ": " << name << " must be " << dtype_name(dtype) << ", got "
                                          << t.describe());
  std::ostringstream want;
  want << "[";
  size_t i = 0;
  for (int64_t d : shape) want << (i++ ? ", " : "") << (d < 0 ? std::string("*") : std::to_string(d));
  want << "]";
  FERRY_ARG_CHECK(t.shape.size() == shape.size(),
                  where << ": " << name << " must have shape " << want.str() << ", got " << t.describe());
  i = 0;
  for (int64_t d : shape) {
    FERRY_ARG_CHECK(d < 0 || t.shape[i] == d,
                    where << ": " << name << " must have shape " << want.str() << ", got " << t.describe());
    FERRY_ARG_CHECK(t.shape[i] >= 0, where << ": " << name << " has a negative size: " << t.describe());
    ++i;
  }
  FERRY_ARG_CHECK(t.is_contiguous(), where << ": " << name << " must be contiguous, got " << t.describe());
}

}  // namespace

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
  FERRY_ARG_CHECK(c.max_recv_rows >= 0, "EpConfig: max_recv_rows must be >= 0 (0 = worst case), got "
                                            << c.max_recv_rows);
  const int64_t rows = worst_case_recv_rows(c, world_size);
  FERRY_ARG_CHECK(rows < (int64_t{1} << 31), "EpConfig: the dispatch output would need " << rows
                                                 << " rows (more than 2^31); lower max_tokens_per_rank");
}

int64_t worst_case_recv_rows(const EpConfig& c, int world_size) {
  const int64_t local = world_size > 0 ? c.num_experts / world_size : 0;
  return int64_t{world_size} * c.max_tokens_per_rank * std::min<int64_t>(c.topk, local) +
         local * (c.expert_alignment - 1);
}

DispatchCall validate_dispatch(const EpConfig& c, const TensorView& tokens, const TensorView& topk_idx,
                               const TensorView& topk_weights, const TensorView& scales, bool reusing) {
  const char* where = "EpBuffer::dispatch";
  DispatchCall call;
  FERRY_ARG_CHECK(tokens.data != nullptr || (tokens.shape.size() == 2 && tokens.numel() == 0),
                  where << ": tokens is null");
  FERRY_ARG_CHECK(tokens.dtype == DataType::kBFloat16 || tokens.dtype == DataType::kFloat8E4M3,
                  where << ": tokens must be bfloat16 or float8_e4m3, got " << tokens.describe());
  FERRY_ARG_CHECK(tokens.shape.size() == 2, where << ": tokens must be 2-D [tokens, " << c.hidden << "], got "
                                                  << tokens.describe());
  call.num_tokens = static_cast<int>(tokens.shape[0]);
  check_tensor(where, "tokens", tokens, tokens.dtype, {-1, c.hidden});
  FERRY_ARG_CHECK(tokens.shape[0] <= c.max_tokens_per_rank,
                  where << ": " << tokens.shape[0] << " tokens exceed max_tokens_per_rank ("
                        << c.max_tokens_per_rank << ")");
  call.fp8_input = tokens.dtype == DataType::kFloat8E4M3;
  if (call.fp8_input) {
    FERRY_ARG_CHECK(c.dispatch_type == DataType::kFloat8E4M3,
                    where << ": float8_e4m3 tokens need dispatch_type float8_e4m3 in the EpConfig (it is "
                          << dtype_name(c.dispatch_type) << ")");
    check_tensor(where, "scales", scales, DataType::kFloat32, {tokens.shape[0], c.hidden / kScaleBlock});
  } else {
    FERRY_ARG_CHECK(scales.empty(), where << ": scales are only taken with float8_e4m3 tokens, got "
                                          << scales.describe());
  }
  if (!(reusing && !topk_idx.given())) {
    FERRY_ARG_CHECK(topk_idx.dtype == DataType::kInt32 || topk_idx.dtype == DataType::kInt64,
                    where << ": topk_idx must be int32 or int64, got " << topk_idx.describe());
    check_tensor(where, "topk_idx", topk_idx, topk_idx.dtype, {tokens.shape[0], c.topk});
    call.idx_is_int64 = topk_idx.dtype == DataType::kInt64;
  }
  // Given = a pointer or a shape: PyTorch's tensors without elements have no pointer.
  call.has_weights = topk_weights.given();
  if (call.has_weights) {
    FERRY_ARG_CHECK(c.with_weights, where << ": topk_weights given but the EpConfig has with_weights = false");
    check_tensor(where, "topk_weights", topk_weights, DataType::kFloat32, {tokens.shape[0], c.topk});
  } else {
    FERRY_ARG_CHECK(!c.with_weights, where << ": topk_weights missing (the EpConfig has with_weights = true)");
  }
  return call;
}

void validate_combine(const EpConfig& c, int world_size, const TensorView& expert_outputs, int64_t rows_needed,
                      const TensorView& out, int num_tokens) {
  const char* where = "EpBuffer::combine";
  if (!expert_outputs.given()) {
    // not part of this call (the receive half)
  } else if (c.mode == EpMode::kLowLatency) {
    const int64_t local = c.num_experts / world_size;
    check_tensor(where, "expert_outputs", expert_outputs, DataType::kBFloat16,
                 {local, int64_t{world_size} * c.max_tokens_per_rank, c.hidden});
  } else {
    check_tensor(where, "expert_outputs", expert_outputs, DataType::kBFloat16, {-1, c.hidden});
    FERRY_ARG_CHECK(expert_outputs.shape[0] >= rows_needed,
                    where << ": expert_outputs has " << expert_outputs.shape[0] << " rows, the dispatch produced "
                          << rows_needed);
  }
  if (!out.empty()) check_tensor(where, "out", out, DataType::kBFloat16, {num_tokens, c.hidden});
}

}  // namespace ep

void validate_ep_config(const EpConfig& config, int world_size) { ep::validate_config(config, world_size); }

}  // namespace ferry
