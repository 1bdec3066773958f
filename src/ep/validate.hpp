// Argument checks at the EP API boundary (host only, no device work), kept apart
// so CPU tests can exercise every rejection without a GPU. Each throws
// InvalidArgument (NotSupported for a valid but unsupported combination) with a
// message naming the argument, what it got and what was expected.
#pragma once

#include <cstdint>

#include "ferry/ep.hpp"

namespace ferry::ep {

// The config on a communicator of `world_size` ranks.
void validate_config(const EpConfig& config, int world_size);

// Worst-case rows of a high-throughput dispatch output (padding included).
int64_t worst_case_recv_rows(const EpConfig& config, int world_size);

struct DispatchCall {
  int num_tokens = 0;        // T' (rows of tokens)
  bool fp8_input = false;    // tokens arrive already in fp8 (with scales)
  bool has_weights = false;
  bool idx_is_int64 = false;
};

// tokens [T', H] bf16 or fp8 (fp8 needs scales [T', H/128] fp32 and an fp8
// dispatch_type); topk_idx [T', K] int32/int64 (may be empty when `reusing`,
// then T' comes from the tokens); topk_weights [T', K] fp32 or empty. All
// contiguous, T' <= max_tokens_per_rank. Weights given without
// config.with_weights (or missing with it) are an error.
DispatchCall validate_dispatch(const EpConfig& config, const TensorView& tokens,
                               const TensorView& topk_idx, const TensorView& topk_weights,
                               const TensorView& scales, bool reusing);

// expert_outputs: bf16, contiguous, [rows, H] with rows >= `rows_needed`
// (high-throughput) or [local_experts, capacity, H] (low-latency); out: bf16
// [num_tokens, H] contiguous. A default TensorView (no data, no shape) means
// "not part of this call": expert_outputs for the receive half, out for the send
// half. A null pointer is accepted for a tensor with zero elements.
void validate_combine(const EpConfig& config, int world_size, const TensorView& expert_outputs,
                      int64_t rows_needed, const TensorView& out, int num_tokens);

}  // namespace ferry::ep
