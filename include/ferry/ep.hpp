// Expert-parallel dispatch and combine: inside a node over NVLink
// peer-to-peer; on a communicator whose ranks span nodes, through the device
// API's window (ferry/window.hpp: NVLink to the node's peers, the proxy to the
// others), with the same API and results (spans_nodes() tells which path).
//
// Semantics (see DESIGN.md, "EP semantics"): every rank holds tokens[T, H] and
// topk_idx[T, K] (-1 = no expert); E experts are spread evenly, E / world_size
// per rank (rank r owns experts [r * local, (r + 1) * local)).
//  - dispatch: each rank receives the tokens its experts must process, grouped
//    by local expert (rows of one expert are contiguous, ordered by source rank,
//    then source token index), with each row's weight. A token crosses NVLink
//    once per destination rank, however many experts it picks there.
//  - combine: each rank gets back out[T, H] in its original token order: the
//    sum over the token's experts of weight * expert_output (fp32 accumulation;
//    unweighted when dispatch had no weights). Partial sums of the experts of
//    one destination rank cross NVLink once, in bf16.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/types.hpp"

namespace ferry {

class Communicator;

enum class EpMode : int {
  kHighThroughput = 0,  // prefill/training: thousands of tokens per rank
  kLowLatency = 1,      // decode: no host synchronization, CUDA-graph capturable
};
const char* ep_mode_name(EpMode mode);

// What dispatch returns and combine takes (DESIGN.md, "EP semantics"; chosen
// once per EpBuffer).
enum class EpLayout : int {
  // One row per (token, local expert), rows of one expert contiguous: for
  // contiguous grouped GEMMs. Combine takes the expert outputs and weights them.
  kExpanded = 0,
  // One row per (token, source rank) that reached this rank, rows of one source
  // contiguous in its token order, with each row's top-k local expert ids (-1:
  // not on this rank) and weights, and per local expert the list of rows that
  // picked it: for GEMMs that gather rows by index (the contract of DeepEP and
  // of an all-to-all). Combine takes one already-weighted row per received row
  // (the caller's sum over its local experts) and sums them per token in fp32.
  // High-throughput mode inside one node.
  kRankRows = 1,
};
const char* ep_layout_name(EpLayout layout);

// A device tensor as the EP API sees it (what PyTorch and DLPack describe):
// element type, shape and strides in elements. Empty strides mean contiguous.
struct TensorView {
  const void* data = nullptr;
  DataType dtype = DataType::kBFloat16;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  TensorView() = default;
  TensorView(const void* data_, DataType dtype_, std::vector<int64_t> shape_,
             std::vector<int64_t> strides_ = {})
      : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(std::move(strides_)) {}
  bool empty() const { return data == nullptr; }
  // The caller passed a tensor: a pointer, or a shape (PyTorch gives a null
  // pointer for a tensor of zero elements).
  bool given() const { return data != nullptr || !shape.empty(); }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string describe() const;  // "bfloat16[128, 7168]" (for messages)
};

struct EpConfig {
  int max_tokens_per_rank = 0;  // T: tokens one rank may dispatch per call
  int hidden = 0;               // H: multiple of 128 (fp8 scales cover 128 columns)
  int topk = 0;                 // K: 1..16
  int num_experts = 0;          // E: divisible by the world size
  // Type of the dispatched tokens on the wire and in the output: kBFloat16, or
  // kFloat8E4M3 with one fp32 scale per 128 columns (bf16 input is quantized in
  // the kernel; fp8 input with its scales travels as is).
  DataType dispatch_type = DataType::kBFloat16;
  bool with_weights = true;     // topk_weights travel with the tokens
  int num_sms = 0;              // SMs the kernels may use; 0: 24 (high-throughput), all (low-latency)
  EpMode mode = EpMode::kHighThroughput;
  int expert_alignment = 1;     // high-throughput: each expert's rows start at a multiple of this
  // High-throughput only: rows the dispatch output can hold (all experts, with
  // alignment padding). 0: the worst case, world * T * min(K, local experts)
  // plus padding. A dispatch that would put more on any rank fails with
  // InvalidArgument on every rank (naming that rank).
  int64_t max_recv_rows = 0;
  EpLayout layout = EpLayout::kExpanded;
  // EpLayout::kRankRows only: this rank's own rows come first, one per token of
  // the call (all T', in token order; a token with no expert here gets a row
  // whose expert ids are all -1 and weights 0, which combine skips), then the
  // other sources' rows in rank order. Its own rows then start at row 0, a place
  // the host knows, so a dispatch that does not quantize (bf16, or fp8 input)
  // has the copy engine write them while the SMs move the peers' rows: fewer SMs
  // reach the same speed (NOTE [EP own rows first]). max_recv_rows, if set, must
  // be at least max_tokens_per_rank.
  bool own_rows_first = false;
  // EpLayout::kRankRows inside one node only: combine reads the peers' rows where
  // the caller wrote them, with no copy (NOTE [EP zero-copy combine]). The caller
  // writes its already-weighted rows into combine_input() (this rank's part of
  // the buffer's symmetric memory) and passes that view as expert_outputs to every
  // combine of this buffer; each home rank then pulls its tokens' rows from the
  // other ranks over NVLink while it sums them. Write it only after this rank's
  // dispatch of the call (in stream order): a combine returns once every home is
  // done reading this rank's rows. Same sums, bit for bit, as the copying combine.
  bool zero_copy_combine = false;
};

// Routing layout of one dispatch, needed by the combine that follows and by a
// re-dispatch with the same routing. An EpBuffer keeps one layout (the latest
// dispatch's); a handle from an older dispatch is rejected. Use one EpBuffer per
// micro-batch that must be in flight at the same time.
struct EpHandle {
  uint64_t generation = 0;  // 0: no layout
  int num_tokens = 0;
  bool with_weights = false;
};

// What dispatch returns. Pointers are into the EpBuffer's own memory and stay
// valid until the next dispatch on it.
struct DispatchResult {
  // High-throughput: [num_rows, H]; low-latency: [local_experts, capacity, H].
  // dispatch_type elements; rows of expert e start at expert_offsets[e].
  void* tokens = nullptr;
  float* scales = nullptr;          // fp8: [rows, H / 128] fp32, else nullptr
  float* weights = nullptr;         // [rows] fp32 weight of each (token, expert) row, or nullptr
  int32_t* expert_counts = nullptr; // device [local_experts]: real rows per expert (no padding)
  int64_t* expert_offsets = nullptr;// device [local_experts + 1]: first row of each expert, then the end
  int local_experts = 0;
  int64_t capacity_per_expert = 0;  // low-latency: rows per expert slab (world * T)
  int64_t capacity_rows = 0;        // rows the token buffer holds
  // High-throughput with a host synchronization: rows used (padding included)
  // and the per-expert counts on the host; otherwise -1 and empty.
  int64_t num_rows = -1;
  std::vector<int64_t> host_expert_counts;
  EpHandle handle;

  // EpLayout::kRankRows only (else nullptr / 0). `tokens` (and `scales`) hold
  // one row per (token, source rank): rows from source s are
  // [source_offsets[s], source_offsets[s + 1]), in that source's token order;
  // num_rows is source_offsets[world] when synchronized. `weights` is nullptr.
  // With EpConfig::own_rows_first, source_offsets[s] is still the first row of
  // source s, but this rank's own T' rows come first (source_offsets[rank] = 0)
  // and the others follow in rank order: rows of source s are then
  // [source_offsets[s], source_offsets[s] + source_rows[s]) (in either order).
  int32_t* row_experts = nullptr;    // device [rows, topk]: local expert id of each top-k slot, -1 if not here
  float* row_weights = nullptr;      // device [rows, topk]: its weight (0 where not here); nullptr without weights
  int64_t* source_offsets = nullptr; // device [world + 1]
  int32_t* source_rows = nullptr;    // device [world]: rows from each source rank
  // device [index_capacity]: for local expert e, the rows that picked it,
  // ascending, at [expert_offsets[e], expert_offsets[e] + expert_counts[e]);
  // expert_offsets[e + 1] - expert_offsets[e] rounds the count up to
  // expert_alignment, the padding entries are -1. num_index_entries (synchronized)
  // is expert_offsets[local_experts].
  int32_t* expert_rows = nullptr;
  int64_t index_capacity = 0;
  int64_t num_index_entries = -1;
  int topk = 0;
};

struct DispatchOptions {
  // High-throughput: synchronize the stream once to learn the row counts
  // (num_rows, host_expert_counts). Off: no host synchronization; use the device
  // counts. Low-latency mode never synchronizes.
  bool sync_counts = true;
  // Re-dispatch new tokens (and weights) with the routing of this handle (the
  // latest one, from a dispatch or from EpBuffer::route): skips the layout step;
  // topk_idx may be empty and is ignored.
  const EpHandle* reuse = nullptr;
};

// Throws InvalidArgument (NotSupported for a valid but unsupported
// combination) when `config` is not usable on a communicator of `world_size`
// ranks: the same check EpBuffer's constructor makes first, with no device work
// (for bindings and callers that check a config before building a buffer).
void validate_ep_config(const EpConfig& config, int world_size);

class EpBuffer {
 public:
  // Collective over the communicator (symmetric allocations, or a Window when
  // ranks span nodes). Throws InvalidArgument for a bad config, NotSupported
  // for more than 8 ranks.
  EpBuffer(Communicator& comm, const EpConfig& config);
  ~EpBuffer();
  EpBuffer(const EpBuffer&) = delete;
  EpBuffer& operator=(const EpBuffer&) = delete;

  // tokens: [T', H] bf16, or fp8 e4m3 with scales [T', H / 128] fp32 (T' <= T);
  // topk_idx: [T', K] int32 or int64; topk_weights: [T', K] fp32 or empty.
  // Asynchronous on `stream` (high-throughput with sync_counts waits once).
  DispatchResult dispatch(const TensorView& tokens, const TensorView& topk_idx,
                          const TensorView& topk_weights, const TensorView& scales,
                          cudaStream_t stream, const DispatchOptions& options = {});

  // The routing layout of topk_idx ([T', K] int32 or int64) alone, on `stream`:
  // the first step of a dispatch, run ahead of it (DeepEP's
  // get_dispatch_layout). A dispatch or dispatch_send of T' tokens with
  // DispatchOptions::reuse = &handle then skips that step, so the layout can run
  // as soon as the router is done, e.g. beside other work on a side stream (the
  // dispatch's stream must then wait for it). It replaces the buffer's layout:
  // the previous dispatch's handle is stale afterwards, and on the device it
  // must come after the previous combine (combine_recv) on this buffer. Not
  // between a send half and its receive half. A bad expert id is reported by
  // the dispatch that reuses the handle, which then sends nothing.
  EpHandle route(const TensorView& topk_idx, cudaStream_t stream);

  // out[T', H] bf16 = sum over each token's experts of weight * expert_outputs[row].
  // expert_outputs: bf16 in the dispatch output's layout ([rows, H] or
  // [local_experts, capacity, H]). EpLayout::kRankRows: [rows, H], one
  // already-weighted row per dispatched row; out[t] = the sum of the token's rows.
  void combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out,
               cudaStream_t stream);

  // dispatch() and combine() run their two halves concurrently (the receive half
  // on an internal stream joined back to `stream`, consuming tokens as they
  // land); num_sms is split between them.
  //
  // Low-latency halves (also valid in high-throughput mode): the send half only
  // issues the writes to peers; the receive half waits for them and produces the
  // result. The caller may run other work between the two. Order on one buffer:
  // dispatch_send, dispatch_recv, combine_send, combine_recv, each on the
  // device in that order (one stream, or streams joined by events).
  EpHandle dispatch_send(const TensorView& tokens, const TensorView& topk_idx,
                         const TensorView& topk_weights, const TensorView& scales,
                         cudaStream_t stream, const DispatchOptions& options = {});
  DispatchResult dispatch_recv(const EpHandle& handle, cudaStream_t stream,
                               const DispatchOptions& options = {});
  // EpLayout::kRankRows: combine_recv reads this rank's own rows from
  // expert_outputs in place (they never leave the GPU), so they must stay as
  // they are until combine_recv has run on the device.
  void combine_send(const TensorView& expert_outputs, const EpHandle& handle, cudaStream_t stream);
  void combine_recv(const EpHandle& handle, const TensorView& out, cudaStream_t stream);

  // EpConfig::zero_copy_combine: bf16 [rows, H] in this rank's part of the
  // symmetric memory (rows: the most a dispatch can put on this rank, W * T or
  // max_recv_rows if lower), where the caller
  // writes the combine's input rows (row i: the weighted sum of dispatch row i's
  // local experts) and which it passes as expert_outputs. Throws InvalidArgument
  // on a buffer without the option.
  TensorView combine_input() const;

  // Throws the error a kernel recorded for this buffer (an expert id out of
  // range, more rows than max_recv_rows), once; the buffer stays usable.
  // Every dispatch and combine call runs this check first.
  void check_errors();

  const EpConfig& config() const { return config_; }
  // True when the communicator's ranks span nodes: the cross-node path
  // (src/ep/internode_dispatch.cu, internode_combine.cu); false: the NVLink kernels of one node.
  bool spans_nodes() const;
  // True when the cross-node path is the hierarchical one (FERRY_EP_HIERARCHICAL=1,
  // read once at construction; high-throughput mode on nodes of several ranks
  // each): one network write per token per destination node, forwarded over
  // NVLink inside it (src/ep/internode_hier.cuh). Same results as the direct path.
  bool hierarchical() const;
  int local_experts() const;
  int world_size() const;
  int rank() const;

  struct State;  // private to the library (src/ep/ep_buffer_state.hpp)

 private:
  void sync_counts(DispatchResult& result, cudaStream_t stream);
  // combine(): both halves' arguments checked once, then the halves launched unchecked.
  void check_combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out);
  void launch_combine_send_half(const TensorView& expert_outputs, cudaStream_t stream, void* one_role_out = nullptr);
  void launch_combine_recv_half(const TensorView& out, cudaStream_t stream);
  void check_zero_copy_input(const TensorView& expert_outputs) const;  // EpConfig::zero_copy_combine
  void init_cross_node();
  void init_hierarchical();
  Communicator& comm_;
  EpConfig config_;
  std::unique_ptr<State> state_;
};

}  // namespace ferry
