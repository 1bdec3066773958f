// EpBuffer: construction (config, tuning knobs, memory), the kernels' error
// report, and the four halves (argument checks, then the launches). The memory
// layout is in ep_memory_plan, the call-order checks in ep_call_state, the
// overlapped dispatch()/combine() in ep_overlap, the cross-node construction
// (init_cross_node, init_hierarchical) in ep_buffer_internode.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "common/dependent_launch.hpp"
#include "common/knobs.hpp"
#include "ep/ep_buffer_state.hpp"
#include "ep/ep_memory_plan.hpp"
#include "ep/ep_paths.hpp"
#include "ep/halves_split.hpp"
#include "ep/send_roles.hpp"
#include "ep/ep_params.hpp"
#include "ep/internode_params.hpp"
#include "ep/ep_args.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"
#include "ferry/window.hpp"

namespace ferry {

using ep::Params;

namespace ep {

int cuda_pointer_device(const void* ptr) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear: an unknown pointer is a host pointer here
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

namespace {

// Low-latency buffers of at most this many tokens per rank take 1024-column
// chunks on 2 ranks of one node (EpBuffer::EpBuffer, measured at 128, 256, 512).
constexpr int kLlSmallTokens = 128;
// Up to this many tokens per rank on 2 ranks of one node, the bf16 low-latency dispatch and the combine (chunks of
// its own, NOTE [EP combine chunks]) take 1024-column chunks too (measured at 128, 256, 512).
constexpr int kLlPairMidTokens = 512;

// The Params a combine half launches with: the buffer's, cut into the combine's chunks (NOTE [EP combine chunks]).
Params combine_params(const Params& base) {
  Params p = base;
  p.chunk_cols = p.combine_chunk_cols;
  p.num_chunks = p.combine_num_chunks;
  return p;
}

// What the checks of this buffer's calls know (ep_args.hpp), named as the caller names them.
CallContext call_context(const EpConfig& config, const Communicator& comm) {
  return CallContext{config, comm.size(), DeviceRule{comm.device(), cuda_pointer_device}, arg_names()};
}

// NOTE [EP own rows first]: the first p.own_rows_copied tokens (and fp8 scales) of this call into the same
// rows of this rank's output, on the copy engine: forked from `stream` before the layout so it starts at
// once, joined back by the end of the dispatch (join_own_rows_copy). Nothing else touches those rows
// meanwhile: peers write only the rows after this call's own ones (at offsets from the counts it publishes),
// and whatever read the previous call's rows ran on `stream` before the fork. Their routing comes from the
// send kernel.
void copy_own_rows(EpBuffer::State& st, const Params& p, cudaStream_t stream) {
  const size_t rows = static_cast<size_t>(p.own_rows_copied);
  if (rows == 0) return;
  FERRY_CUDA_CHECK(cudaEventRecord(st.copy_fork, stream));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(st.copy_stream, st.copy_fork, 0));
  FERRY_CUDA_CHECK(cudaMemcpyAsync(p.out_tokens, p.tokens, rows * p.hidden * (p.fp8_out ? 1 : 2),
                                   cudaMemcpyDeviceToDevice, st.copy_stream));
  if (p.fp8_out)
    FERRY_CUDA_CHECK(cudaMemcpyAsync(p.out_scales, p.scales_in, rows * (p.hidden / kScaleBlock) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st.copy_stream));
  FERRY_CUDA_CHECK(cudaEventRecord(st.copy_join, st.copy_stream));
  st.copy_pending = true;
}

void join_own_rows_copy(EpBuffer::State& st, cudaStream_t stream) {
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, st.copy_join, 0));
  st.copy_pending = false;
}

}  // namespace

}  // namespace ep

EpBuffer::EpBuffer(Communicator& comm, const EpConfig& config)
    : comm_(comm), config_(config), state_(std::make_unique<State>()) {
  comm_.check();
  const int W = comm_.size();
  ep::validate_config(config_, W);
  // Ranks in several nodes take the cross-node path (internode_dispatch.cu, internode_combine.cu); one node, the NVLink kernels.
  state_->spans_nodes = comm_.topology().num_nodes > 1;
  FERRY_CHECK(!state_->spans_nodes || W <= ep::kMaxRanks, NotSupported,
              "EpBuffer: at most " << ep::kMaxRanks << " ranks across nodes (the routing layout's limit), got "
                                   << W << " in " << comm_.topology().num_nodes << " nodes");
  FERRY_CHECK(W <= ep::kMaxRanks, NotSupported,
              "EpBuffer: at most " << ep::kMaxRanks << " ranks in a node, got " << W);
  // At most the communicator's SM budget (NOTE [SM budget]: all SMs with one rank per GPU).
  if (config_.num_sms == 0) config_.num_sms = config_.mode == EpMode::kHighThroughput ? 24 : comm_.sm_budget();
  config_.num_sms = std::min(config_.num_sms, comm_.sm_budget());

  const int T = config_.max_tokens_per_rank, H = config_.hidden, K = config_.topk, E = config_.num_experts;
  const ep::EpDims dims = ep::ep_dims(config_, W);  // sizes computed in one place (ep_args.cpp)
  const int Le = dims.local_experts;
  const bool fp8 = config_.dispatch_type == DataType::kFloat8E4M3;
  const bool ll = config_.mode == EpMode::kLowLatency;
  Params& p = state_->base;
  p.world_size = W;
  p.rank = comm_.rank();
  p.max_tokens = T;
  p.hidden = H;
  p.topk = K;
  p.num_experts = E;
  p.local_experts = Le;
  p.expert_alignment = ll ? 1 : config_.expert_alignment;
  p.low_latency = ll;
  p.fp8_out = fp8;
  p.capacity_per_expert = dims.capacity_per_expert;
  p.capacity_rows = dims.capacity_rows;
  p.rank_rows = config_.layout == EpLayout::kRankRows;
  p.own_rows_first = p.rank_rows && config_.own_rows_first;
  p.zero_copy_combine = p.rank_rows && config_.zero_copy_combine;  // NOTE [EP zero-copy combine]
  p.index_capacity = dims.index_capacity;
  p.meta_bytes = ep::meta_record_bytes(K);
  p.num_blocks = config_.num_sms;
  // Chunks: few tokens (low-latency) need a row spread over many warps; many
  // tokens keep whole-ish rows per warp (fewer ready words).
  // 4xH200: HT whole 7168-column rows beat 2048/3584; LL 2048 beat 256/512/1024.
  // 2xH100 (2 ranks, LL, 2 rounds each): at T=128, 1024 columns beat 2048
  // (combine 30.1 -> 26.1 us, fp8 dispatch 32.6 -> 30.5, bf16 34.6 -> 34.3; 512
  // and 256 slower than both); at T=256 and 512, 2048 wins (1024 at 256: fp8
  // dispatch 38.9 -> 42.4, combine 40.1 -> 41.0; at 512: fp8 dispatch 53.8 ->
  // 58.4, combine 61.6 -> 65.2). The chunking must be the same on every rank
  // (a receiver decodes a source's items with its own), so it follows the
  // buffer's shape (world size, max tokens per rank), never a call's tokens.
  // Only inside one node: across nodes it was not measured.
  // Session 39 (2xH100, c3, FERRY_EP_CHUNK_COLS=1024 on one binary, 2 rounds): at T=256 / 512 the bf16 dispatch
  // 0.986 / 0.904 (52.4 -> 47.4 us), fp8 1.126 / 1.104 slower: bf16 takes 1024 columns up to 512 tokens.
  const bool pair_node = comm_.size() == 2 && comm_.topology().num_nodes == 1;
  const bool narrow_ll = pair_node && (T <= ep::kLlSmallTokens || (!fp8 && T <= ep::kLlPairMidTokens));
  const int default_chunk = !ll ? 8192 : (narrow_ll ? 1024 : 2048);
  p.chunk_cols = std::max(256, static_cast<int>(knobs::kEpChunkCols.read_or(default_chunk)) / 256 * 256);
  p.num_chunks = (H + p.chunk_cols - 1) / p.chunk_cols;
  // NOTE [EP combine chunks]: the combine's chunks are only its own work items and ready words (a partial of
  // (token, chunk) is released by one warp and summed by one warp); nothing in them comes from the dispatch's
  // chunks, so the low-latency combine inside one node may cut rows differently (FERRY_EP_COMBINE_CHUNK_COLS).
  // By default 1024 columns on 2 ranks of one node up to 512 tokens per rank, where the fp8 dispatch takes 2048 above
  // 128 tokens (2xH100, session 39 c2, the knob on one binary, 3 rounds: combine at T=256 37.3 -> 32.3 us, T=512
  // 50.6 -> 49.7, T=128 the same chunks; 512 and 256 columns slower). Elsewhere it cuts them as the dispatch
  // does. Read once here: every rank the same.
  const bool own_combine_chunks = ll && !state_->spans_nodes && config_.layout == EpLayout::kExpanded;
  const bool pair_ll = own_combine_chunks && pair_node && T <= ep::kLlPairMidTokens;
  p.combine_chunk_cols = p.chunk_cols;
  if (own_combine_chunks) {
    const int64_t default_combine_chunk = pair_ll ? 1024 : p.chunk_cols;
    p.combine_chunk_cols =
        std::max(256, static_cast<int>(knobs::kEpCombineChunkCols.read_or(default_combine_chunk)) / 256 * 256);
  }
  p.combine_num_chunks = (H + p.combine_chunk_cols - 1) / p.combine_chunk_cols;
  // dispatch()/combine() run both halves at once (the receive half consumes
  // tokens as they land): receive blocks + send blocks = num_sms, split by
  // halves_split (halves_split.hpp), here inside one node; across nodes
  // init_cross_node splits them once the window is known.
  // The halves overlap through programmatic dependent launch (NOTE [Overlapped halves
  // and free SMs]), which needs compute capability 9.0; before it they would only
  // run one after the other on half the SMs each, so they run apart with all of them.
  state_->overlap = knobs::kEpOverlap.value() && config_.num_sms >= 2 && supports_dependent_launch(comm_.device());
  state_->fuse_layout = knobs::kEpFuseLayout.value();
  state_->rank_rows_local_blocks = knobs::kEpRankRowsLocalBlocks.read();
  if (p.own_rows_first) {  // NOTE [EP own rows first]
    state_->own_rows_copy_percent = knobs::kEpOwnRowsCopyPercent.read();
    FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->copy_stream, cudaStreamNonBlocking));
    FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&state_->copy_fork, cudaEventDisableTiming));
    FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&state_->copy_join, cudaEventDisableTiming));
  }
  p.pair_layout = knobs::kEpPairLayout.value();  // NOTE [EP pair layout]; 0: one thread per token (to compare)
  p.spread_items = knobs::kEpSpreadItems.value();  // NOTE [EP item order]; 0: block-major (to compare)
  p.wait = WaitContext{comm_.device_error_state(), comm_.device_abort_flag(), comm_.timeout_ns(), comm_.rank()};

  // NOTE [EP hierarchical] (internode_hier.cuh): high-throughput across nodes of several ranks each
  // (FERRY_EP_HIERARCHICAL=0: the direct path instead).
  const Topology& topo = comm_.topology();
  // Decided from what every rank sees alike (the topology), so all ranks agree or all throw.
  const std::optional<bool> hier_env = knobs::kEpHierarchical.read();  // unset: on where it applies
  const bool hier_off = hier_env.has_value() && !*hier_env, hier_required = hier_env.value_or(false);
  if (state_->spans_nodes && !ll && !hier_off) {
    FERRY_CHECK(topo.ranks_per_node > 0 || !hier_required, NotSupported,
                "EpBuffer: FERRY_EP_HIERARCHICAL=1 needs nodes of equal sizes; the " << W << " ranks span "
                    << topo.num_nodes << " nodes of different sizes (unset it: the direct path is taken then)");
    // One rank per node: the direct path is the same thing. Unequal nodes: the direct path.
    state_->hierarchical = topo.ranks_per_node > 1;
  }
  // The one choice of path (ep_paths.hpp); a combination no path takes throws here.
  state_->path = &ep::choose_path(state_->spans_nodes, state_->hierarchical, config_.layout, W, topo.num_nodes);
  state_->overlap = state_->overlap && state_->path->overlaps;  // the direct path: with ranges (init_cross_node)
  // NOTE [EP combine one role] (combine.cu): where the path has it, in high throughput, unless the knob says 0.
  state_->combine_one_role = knobs::kEpCombineOneRole.value() && state_->path->combine_one_role &&
                             config_.mode == EpMode::kHighThroughput;
  state_->combine_prefetch_max_blocks = static_cast<int>(knobs::kEpCombinePrefetchMaxBlocks.value());
  if (state_->spans_nodes) {
    init_cross_node();
  } else {
    // NOTE [EP staged low latency] (staged_dispatch.cu): the expanded low-latency dispatch through staging rows,
    // where its receive half's layout of every source fits the shape.
    p.staged_rows =
        ll && !p.rank_rows && ep::stages_low_latency_rows(T, H, fp8) && ep::staged_receive_fits(W, E, T);
    p.stage_row_bytes = p.staged_rows ? ep::stage_row_bytes(H, fp8, K) : 0;
    p.stage_box_bytes = p.staged_rows ? ep::StagedBox::bytes(T, K) : 0;
    const ep::HalvesSplit split = ep::halves_split(ep::halves_shape(config_, W));
    state_->dispatch_recv_blocks = split.dispatch_recv_blocks;
    state_->combine_recv_blocks = split.combine_recv_blocks;
    // Symmetric (one allocation, the same order and sizes on every rank), then
    // local memory (ep_memory_plan.hpp).
    const ep::MemoryPlan plan = ep::plan_memory(p, config_.with_weights);
    state_->symmetric = comm_.heap().allocate(plan.symmetric.total);
    // Peer tables by rank in the node: one node (checked above), so entry r is global rank r.
    ep::bind_symmetric(p, plan.symmetric, state_->symmetric, comm_.topology().ranks_in_node);
    FERRY_CUDA_CHECK(cudaMalloc(&state_->local, plan.local.total));
    auto* l = static_cast<uint8_t*>(state_->local);
    ep::bind_local(p, plan.local, l, config_.with_weights);
    ep::zero_local(plan.local, l);
    // Every kernel this buffer may launch, loaded before the first call (ep_params.hpp: lazy loading).
    ep::load_layout_kernel();
    ep::load_dispatch_kernels();
    ep::load_combine_kernels();
    ep::load_rank_rows_dispatch_kernels();
    ep::load_rank_rows_combine_kernels();
    ep::load_rank_rows_pull_combine_kernels();
  }

  FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&state_->status), sizeof(ep::EpStatus),
                                 cudaHostAllocMapped));
  std::memset(const_cast<ep::EpStatus*>(state_->status), 0, sizeof(ep::EpStatus));
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&state_->status_device), state_->status, 0));
  p.status = state_->status_device;
  FERRY_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&state_->host_offsets), sizeof(int64_t) * (Le + 1)));
  FERRY_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&state_->host_counts), sizeof(int32_t) * Le));
  FERRY_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&state_->host_rows), sizeof(int64_t)));
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  comm_.bootstrap().barrier();  // every rank's memory is ready before anyone dispatches
}

bool EpBuffer::spans_nodes() const { return state_->spans_nodes; }
bool EpBuffer::hierarchical() const { return state_->hierarchical; }

EpBuffer::~EpBuffer() {
  if (!state_) return;
  state_->window.reset();  // synchronizes the device and completes this rank's puts first
  // Symmetric memory is released with the heap (collective release is not safe
  // in a destructor).
  if (state_->local) cudaFree(state_->local);
  if (state_->hier_local) cudaFree(state_->hier_local);
  if (state_->status) cudaFreeHost(state_->status);
  if (state_->host_offsets) cudaFreeHost(state_->host_offsets);
  if (state_->host_counts) cudaFreeHost(state_->host_counts);
  if (state_->host_rows) cudaFreeHost(state_->host_rows);
  if (state_->copy_fork) cudaEventDestroy(state_->copy_fork);
  if (state_->copy_join) cudaEventDestroy(state_->copy_join);
  if (state_->copy_stream) cudaStreamDestroy(state_->copy_stream);
}

int EpBuffer::local_experts() const { return state_->base.local_experts; }
int EpBuffer::world_size() const { return comm_.size(); }
int EpBuffer::rank() const { return comm_.rank(); }

void EpBuffer::check_errors() {
  comm_.check();
  volatile ep::EpStatus* s = state_->status;
  const int32_t code = s->code;
  if (code == ep::kEpOk) return;
  const int32_t token = s->token, k = s->k, overflowed_rank = s->rank;
  const int64_t value = s->value;
  std::memset(const_cast<ep::EpStatus*>(state_->status), 0, sizeof(ep::EpStatus));
  if (code == ep::kEpBadExpert)
    FERRY_THROW(InvalidArgument, "EpBuffer::dispatch: topk_idx[" << token << "][" << k << "] = " << value
                                     << " is not an expert id (expected -1 or 0.." << config_.num_experts - 1
                                     << "); this rank sent nothing");
  if (code == ep::kEpRepeatedExpert)
    FERRY_THROW(InvalidArgument, "EpBuffer::dispatch: topk_idx[" << token << "][" << k << "] = " << value
                                     << " repeats an expert of the same token (each token's experts must be "
                                     << "distinct); this rank sent nothing");
  // NOTE [EP overflow is collective]: every rank reports it, naming the rank.
  FERRY_THROW(InvalidArgument, "EpBuffer::dispatch: rank " << overflowed_rank
                                   << (overflowed_rank == comm_.rank() ? " (this rank)" : "") << " would receive "
                                   << value << " rows (with alignment padding) but max_recv_rows is "
                                   << state_->base.capacity_rows
                                   << "; raise EpConfig::max_recv_rows (every rank's dispatch fails; nothing was "
                                   << "sent to rank " << overflowed_rank << ")");
}

EpHandle EpBuffer::dispatch_send(const TensorView& tokens, const TensorView& topk_idx,
                                 const TensorView& topk_weights, const TensorView& scales, cudaStream_t stream,
                                 const DispatchOptions& options) {
  check_errors();
  State& st = *state_;
  const ep::DispatchCall call = ep::validate_dispatch(ep::call_context(config_, comm_), st.calls,
                                                      {tokens, topk_idx, topk_weights, scales, options.reuse});
  const bool reusing = options.reuse != nullptr;

  Params p = st.base;
  p.num_tokens = call.num_tokens;
  p.fp8_in = call.fp8_input;
  p.idx_int64 = call.idx_is_int64;
  p.with_weights = call.has_weights;
  p.tokens = tokens.data;
  p.scales_in = static_cast<const float*>(scales.data);
  p.topk_idx = topk_idx.data;
  p.topk_weights = static_cast<const float*>(topk_weights.data);
  p.reuses_layout = reusing;
  if (st.grids.send_blocks > 0) p.num_blocks = st.grids.send_blocks;
  p.recv_in_send_grid = st.grids.one_grid;
  // NOTE [EP own rows first]: where nothing is quantized the copy engine writes the own rows, and the
  // send blocks are all for the peers (they write the own rows' routing on the way).
  const bool copies = p.own_rows_first && !ep::quantizes(p);
  const int percent = copies ? ep::own_rows_copy_percent(p.num_blocks, st.own_rows_copy_percent) : 0;
  p.own_rows_copied = static_cast<int>(int64_t(call.num_tokens) * percent / 100);
  if (p.rank_rows)
    p.rank_rows_local_blocks = percent == 100 ? 0
                                              : ep::rank_rows_local_blocks(p.num_blocks, p.world_size, ep::quantizes(p),
                                                                           st.rank_rows_local_blocks);
  ep::copy_own_rows(st, p, stream);
  // Tokens that fit one layout block: the send kernel does the layout where the
  // path can (NOTE [EP fused layout]).
  p.fuse_layout = !reusing && call.num_tokens <= ep::max_fused_layout_tokens(p.num_experts) && st.fuse_layout &&
                  st.path->fuses_layout;
  if (!reusing && !p.fuse_layout) ep::launch_layout(p, stream);
  st.path->dispatch_send(st, p, stream);
  // The own rows' copy joins `stream` here, unless dispatch() launches the receive grid next
  // (then after it: a wait between the two grids would stop the receive grid's early start).
  // Joined within the half, a dispatch_send captured in a graph of its own is complete.
  if (st.copy_pending && st.grids.recv_blocks == 0) ep::join_own_rows_copy(st, stream);
  return st.calls.dispatch_send_done(reusing, call.num_tokens, call.has_weights);
}

EpHandle EpBuffer::route(const TensorView& topk_idx, cudaStream_t stream) {
  check_errors();
  State& st = *state_;
  const ep::DispatchCall call = ep::validate_route(ep::call_context(config_, comm_), st.calls, topk_idx);
  Params p = st.base;
  p.num_tokens = call.num_tokens;
  p.idx_int64 = call.idx_is_int64;
  p.topk_idx = topk_idx.data;
  ep::launch_layout(p, stream);  // what dispatch_send runs when it does not fuse the layout
  return st.calls.route_done(call.num_tokens);
}

DispatchResult EpBuffer::dispatch_recv(const EpHandle& handle, cudaStream_t stream, const DispatchOptions& options) {
  comm_.check();  // an aborted communicator refuses the call before anything launches
  State& st = *state_;
  ep::validate_dispatch_recv(ep::call_context(config_, comm_), st.calls, handle);
  Params p = st.base;
  p.num_tokens = st.calls.num_tokens();
  p.with_weights = st.calls.with_weights();
  if (st.grids.recv_blocks > 0) p.num_blocks = st.grids.recv_blocks;
  p.overlapped_receive = st.grids.recv_blocks > 0;
  if (!st.grids.one_grid) st.path->dispatch_recv(st, p, stream);  // else done by the send grid
  if (st.copy_pending) ep::join_own_rows_copy(st, stream);  // dispatch(): after the receive grid
  st.calls.dispatch_recv_done();

  const int Le = p.local_experts;
  DispatchResult r;
  r.tokens = p.out_tokens;
  r.scales = p.out_scales;
  r.weights = st.calls.with_weights() ? p.out_weights : nullptr;
  r.expert_counts = p.expert_counts;
  r.expert_offsets = p.expert_offsets;
  r.local_experts = Le;
  r.capacity_per_expert = p.capacity_per_expert;
  r.capacity_rows = p.capacity_rows;
  r.handle = handle;
  if (p.rank_rows) {
    r.weights = nullptr;
    r.row_experts = p.out_row_experts;
    r.row_weights = st.calls.with_weights() ? p.out_row_weights : nullptr;
    r.source_offsets = p.source_offsets;
    r.source_rows = p.recv_token_count;  // written with source_offsets (rank_rows_dispatch.cu)
    r.expert_rows = p.out_expert_rows;
    r.index_capacity = p.index_capacity;
    r.topk = p.topk;
  }
  if (config_.mode == EpMode::kHighThroughput && options.sync_counts && !st.grids.defer_sync) sync_counts(r, stream);
  return r;
}

void EpBuffer::sync_counts(DispatchResult& r, cudaStream_t stream) {
  State& st = *state_;
  const Params& p = st.base;
  const int Le = p.local_experts;
  FERRY_CUDA_CHECK(cudaMemcpyAsync(st.host_offsets, p.expert_offsets, sizeof(int64_t) * (Le + 1),
                                   cudaMemcpyDeviceToHost, stream));
  FERRY_CUDA_CHECK(cudaMemcpyAsync(st.host_counts, p.expert_counts, sizeof(int32_t) * Le, cudaMemcpyDeviceToHost,
                                   stream));
  if (p.rank_rows)
    FERRY_CUDA_CHECK(cudaMemcpyAsync(st.host_rows, p.source_offsets + p.world_size, sizeof(int64_t),
                                     cudaMemcpyDeviceToHost, stream));
  comm_.synchronize(stream);
  check_errors();  // a bad expert id or too many rows, found by the kernels
  r.num_rows = p.rank_rows ? *st.host_rows : st.host_offsets[Le];
  if (p.rank_rows) r.num_index_entries = st.host_offsets[Le];
  r.host_expert_counts.assign(st.host_counts, st.host_counts + Le);
  st.calls.set_synced_rows(r.num_rows);
}

void EpBuffer::combine_send(const TensorView& expert_outputs, const EpHandle& handle, cudaStream_t stream) {
  check_errors();
  ep::validate_combine_send(ep::call_context(config_, comm_), state_->calls, handle, expert_outputs);
  check_zero_copy_input(expert_outputs);
  launch_combine_send_half(expert_outputs, stream);
}

void EpBuffer::check_combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out) {
  check_errors();
  ep::validate_combine(ep::call_context(config_, comm_), state_->calls, handle, expert_outputs, out);
  check_zero_copy_input(expert_outputs);
}

TensorView EpBuffer::combine_input() const {
  FERRY_ARG_CHECK(config_.zero_copy_combine,
                  "EpBuffer::combine_input: the buffer was built without EpConfig::zero_copy_combine");
  const Params& p = state_->base;
  // NOTE [EP zero-copy combine]: this rank's part of the combine stage region ([W][T][H] bf16), which no peer
  // writes on such a buffer; a rank never holds more than W * T rows.
  return TensorView(p.combine_stage.at(p.rank), DataType::kBFloat16,
                    {ep::zero_copy_input_rows(config_, p.world_size), p.hidden});
}

void EpBuffer::check_zero_copy_input(const TensorView& expert_outputs) const {
  if (!config_.zero_copy_combine) return;
  // Its address, which only the buffer knows; its shape ([rows, H], at most combine_input()'s rows) the
  // argument checks before this one took (check_expert_outputs, ep_args.cpp).
  FERRY_ARG_CHECK(expert_outputs.data == combine_input().data,
                  ep::arg_names().combine << ": with EpConfig::zero_copy_combine, " << ep::arg_names().expert_outputs
                                          << " must be the buffer's combine_input() (the other ranks read its rows "
                                             "there), got "
                                          << expert_outputs.describe());
}

void EpBuffer::launch_combine_send_half(const TensorView& expert_outputs, cudaStream_t stream, void* one_role_out) {
  State& st = *state_;
  Params p = ep::combine_params(st.base);
  p.combine_out = one_role_out;  // NOTE [EP combine one role]: the send grid writes this rank's own tokens' sums
  p.num_tokens = st.calls.num_tokens();
  p.with_weights = st.calls.with_weights();
  p.expert_outputs = expert_outputs.data;
  st.combine_expert_outputs = expert_outputs.data;  // rank rows: the receive half reads its own rows there
  if (st.grids.send_blocks > 0) p.num_blocks = st.grids.send_blocks;
  st.path->combine_send(st, p, stream);
  st.calls.combine_send_done();
}

void EpBuffer::combine_recv(const EpHandle& handle, const TensorView& out, cudaStream_t stream) {
  comm_.check();  // an aborted communicator refuses the call before anything launches
  ep::validate_combine_recv(ep::call_context(config_, comm_), state_->calls, handle, out);
  launch_combine_recv_half(out, stream);
}

void EpBuffer::launch_combine_recv_half(const TensorView& out, cudaStream_t stream) {
  State& st = *state_;
  const int num_tokens = st.calls.num_tokens();
  Params p = ep::combine_params(st.base);
  p.num_tokens = num_tokens;
  p.combine_out = const_cast<void*>(out.data);
  p.expert_outputs = st.combine_expert_outputs;
  p.with_weights = st.calls.with_weights();  // the low-latency receive weights this rank's own rows too
  if (st.grids.recv_blocks > 0) p.num_blocks = st.grids.recv_blocks;
  p.overlapped_receive = st.grids.recv_blocks > 0;
  st.path->combine_recv(st, p, stream);
  st.calls.combine_recv_done();
}

}  // namespace ferry
