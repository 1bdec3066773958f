// Argument checks at the EP API boundary (host only, no device work), kept apart
// so CPU tests can exercise every rejection without a GPU. One function per call
// (validate_dispatch for dispatch_send, validate_dispatch_recv,
// validate_combine_send, validate_combine_recv; validate_combine for combine()),
// called once by that call (ep_buffer.cpp); the Python layer reaches the same
// functions through its binding (python/csrc/ops.cpp).
// Each throws InvalidArgument (NotSupported for a valid but unsupported
// combination) naming the argument, what it got and what was expected, before
// anything is launched, and changes nothing.
//
// This header includes public headers only: the binding includes it too.
#pragma once

#include <cstdint>

#include "ferry/ep.hpp"

namespace ferry::ep {

class CallState;  // ep_call_state.hpp

// Sizes derived from a config on `world_size` ranks: computed here only, used by
// the checks, the buffer and (through the binding) the Python layer.
struct EpDims {
  int local_experts = 0;            // E / world_size
  int64_t capacity_per_expert = 0;  // low-latency: rows of one expert's slab (world * T); else 0
  int64_t capacity_rows = 0;        // rows the dispatch output holds (all experts; rank rows: all sources)
  int64_t index_capacity = 0;       // rank rows: entries of the per-expert row lists (padding included); else 0
};
EpDims ep_dims(const EpConfig& config, int world_size);

// EpConfig::zero_copy_combine: rows of EpBuffer::combine_input() (NOTE [EP zero-copy combine]): the dispatch
// output's, at most world_size * max_tokens_per_rank (this rank's part of the combine stage region).
int64_t zero_copy_input_rows(const EpConfig& config, int world_size);

// The config on a communicator of `world_size` ranks.
void validate_config(const EpConfig& config, int world_size);

// Worst-case rows of a high-throughput dispatch output (padding included).
int64_t worst_case_recv_rows(const EpConfig& config, int world_size);

// NOTE [EP argument names]
// Messages name calls and arguments as the caller knows them: the C++ API's
// parameter names by default; the Python layer's (input, exp_indices, ...)
// while its binding calls into an EpBuffer (ScopedArgNames). Tests match on
// these words.
struct ArgNames {
  const char* dispatch = "EpBuffer::dispatch";
  const char* dispatch_recv = "EpBuffer::dispatch_recv";
  const char* combine = "EpBuffer::combine";
  const char* combine_recv = "EpBuffer::combine_recv";
  const char* tokens = "tokens";
  const char* scales = "scales";
  const char* topk_idx = "topk_idx";
  const char* topk_weights = "topk_weights";
  const char* expert_outputs = "expert_outputs";
  const char* out = "out";
  const char* handle = "handle";
  const char* max_tokens = "max_tokens_per_rank";
  const char* dispatch_type = "EpConfig::dispatch_type";
  const char* with_weights = "EpConfig::with_weights";
  const char* owner = "EpBuffer";  // what a handle belongs to
  const char* route = "EpBuffer::route";  // last: the names are also given in order (tests)
};
// The names in effect on this thread.
const ArgNames& arg_names();
class ScopedArgNames {
 public:
  explicit ScopedArgNames(const ArgNames& names);
  ~ScopedArgNames();
  ScopedArgNames(const ScopedArgNames&) = delete;
  ScopedArgNames& operator=(const ScopedArgNames&) = delete;

 private:
  const ArgNames* previous_;
};

// The CUDA device whose memory `ptr` points to, or -1 for host memory or a
// pointer CUDA does not know (ep_buffer.cpp: cudaPointerGetAttributes).
int cuda_pointer_device(const void* ptr);
using PointerDevice = int (*)(const void* ptr);

// Tensors must be memory of CUDA device `device`, as `locate` reports (tests
// pass their own); device < 0: not checked.
struct DeviceRule {
  int device = -1;
  PointerDevice locate = cuda_pointer_device;
};

// What every check of one buffer's calls knows.
struct CallContext {
  const EpConfig& config;
  int world_size = 1;
  DeviceRule device;
  const ArgNames& names;
};

// Throws unless `t` (when it has elements) is memory of the rule's device.
void check_device(const char* where, const char* name, const TensorView& t, const DeviceRule& rule);

struct DispatchArgs {
  const TensorView& tokens;        // [T', H] bf16, or fp8 e4m3 with scales [T', H / 128] fp32
  const TensorView& topk_idx;      // [T', K] int32/int64; may be empty when reusing
  const TensorView& topk_weights;  // [T', K] fp32, given exactly when config.with_weights
  const TensorView& scales;
  const EpHandle* reuse = nullptr;  // DispatchOptions::reuse
};

struct DispatchCall {
  int num_tokens = 0;        // T' (rows of tokens)
  bool fp8_input = false;    // tokens arrive already in fp8 (with scales)
  bool has_weights = false;
  bool idx_is_int64 = false;
};

// dispatch_send: the call order and the reused handle, then every tensor
// (type, shape, contiguity, T' <= max_tokens_per_rank, then device).
DispatchCall validate_dispatch(const CallContext& ctx, const CallState& calls, const DispatchArgs& args);
// EpBuffer::route: no half-done call, then topk_idx (int32/int64 [T', K],
// T' <= max_tokens_per_rank, contiguous, on the device). call.has_weights stays false.
DispatchCall validate_route(const CallContext& ctx, const CallState& calls, const TensorView& topk_idx);
// dispatch_recv: a dispatch_send to receive, and its handle.
void validate_dispatch_recv(const CallContext& ctx, const CallState& calls, const EpHandle& handle);
// combine_send: the latest dispatch's handle, after its receive half; expert_outputs
// bf16 [rows >= the dispatch's rows, H] (high-throughput; rows unknown without a
// host synchronization) or [local_experts, capacity, H] (low-latency).
void validate_combine_send(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                           const TensorView& expert_outputs);
// combine_recv: a combine_send to receive, its handle; out bf16 [T', H] (may be
// null when T' is 0).
void validate_combine_recv(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                           const TensorView& out);
// combine(): both halves' checks at once, before the send half communicates (a
// bad `out` found after it would leave the peers waiting).
void validate_combine(const CallContext& ctx, const CallState& calls, const EpHandle& handle,
                      const TensorView& expert_outputs, const TensorView& out);

// The same checks without a buffer (the Python layer's checks without a GPU):
// a dispatch on a buffer with no call in progress, and the two combine halves
// after a dispatch of `num_tokens` tokens into `num_rows` rows (-1: unknown);
// `out` is checked when given.
DispatchCall validate_dispatch_args(const CallContext& ctx, const DispatchArgs& args);
void validate_combine_args(const CallContext& ctx, int num_tokens, int64_t num_rows,
                           const TensorView& expert_outputs, const TensorView& out);

}  // namespace ferry::ep
