// EpBuffer: memory, argument checks and launches of the EP kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "common/env.hpp"
#include "ep/ep_params.hpp"
#include "ep/validate.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"
#include "memory/peer_ptrs.hpp"

namespace ferry {

using ep::Params;

namespace {

// A tuning knob (non-negative integer) from the environment.
int env_int(const char* name, int fallback) { return static_cast<int>(env_size(name, size_t(fallback))); }
size_t round4k(size_t v) { return (v + 4095) / 4096 * 4096; }

// Bump allocator over one allocation: regions are 4 KB aligned.
struct Carve {
  size_t total = 0;
  size_t take(size_t bytes) {
    const size_t at = total;
    total += round4k(std::max<size_t>(bytes, 1));
    return at;
  }
};

void check_on_device(const char* where, const char* name, const TensorView& t, int device) {
  if (t.empty() || t.numel() == 0) return;
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, t.data);
  if (err != cudaSuccess) cudaGetLastError();  // clear: an unknown pointer is a host pointer here
  const bool ok = err == cudaSuccess &&
                  (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                  attr.device == device;
  FERRY_ARG_CHECK(ok, where << ": " << name << " must be memory of CUDA device " << device << " (got "
                            << (err != cudaSuccess || attr.type == cudaMemoryTypeUnregistered ||
                                        attr.type == cudaMemoryTypeHost
                                    ? std::string("host memory")
                                    : "memory of device " + std::to_string(attr.device))
                            << ")");
}

}  // namespace

// NOTE [EpBuffer call order]
// One layout lives in the buffer: the latest dispatch's. The host tracks where
// the call sequence stands so a misuse is an error here, not a device hang:
// dispatch_send -> dispatch_recv -> (combine_send -> combine_recv)* and again.
// A new dispatch may follow a dispatch directly (the epochs make staging reuse
// safe, NOTE [EP epochs]). Every rank must make the same calls in the same order.
enum class Stage { kIdle, kDispatchSent, kDispatched, kCombineSent };

struct EpBuffer::State {
  Params base{};                 // fields that do not change between calls
  SymmetricBuffer symmetric;
  void* local = nullptr;         // cudaMalloc: layout, receive side, outputs, epochs
  ep::EpStatus* status = nullptr;  // host-mapped
  ep::EpStatus* status_device = nullptr;
  int64_t* host_offsets = nullptr;  // pinned: expert_offsets copied back (high-throughput sync)
  int32_t* host_counts = nullptr;
  uint64_t generation = 0;       // of the current layout
  int num_tokens = 0;            // of the current layout
  bool with_weights = false;
  Stage stage = Stage::kIdle;
  int64_t synced_rows = -1;      // rows of the current dispatch output, when known on the host
  bool overlap = true;           // dispatch()/combine(): both halves at once
  bool fuse_layout = true;       // NOTE [EP fused layout]; FERRY_EP_FUSE_LAYOUT=0 turns it off (to compare)
  int dispatch_recv_blocks = 1;  // of num_sms, when overlapping
  int combine_recv_blocks = 1;
  cudaStream_t side = nullptr;   // the receive half's stream when overlapping
  cudaEvent_t fork = nullptr, join = nullptr;
  // Set by dispatch()/combine() around their halves: grids of the concurrent
  // halves, and the count synchronization deferred past the join.
  int send_blocks = 0, recv_blocks = 0;
  bool defer_sync = false;

  // Scoped: the overlapped halves' settings, reset however the calls end.
  struct Overlap {
    State& st;
    Overlap(State& s, int num_sms, int recv) : st(s) {
      st.recv_blocks = recv;
      st.send_blocks = num_sms - recv;
      st.defer_sync = true;
    }
    ~Overlap() { st.send_blocks = st.recv_blocks = 0, st.defer_sync = false; }
  };
};

EpBuffer::EpBuffer(Communicator& comm, const EpConfig& config)
    : comm_(comm), config_(config), state_(std::make_unique<State>()) {
  comm_.check();
  const int W = comm_.size();
  ep::validate_config(config_, W);
  FERRY_CHECK(comm_.topology().num_nodes == 1, NotSupported,
              "EpBuffer: ranks in several nodes are not supported yet (" << comm_.topology().num_nodes
                                                                         << " nodes)");
  FERRY_CHECK(W <= ep::kMaxRanks, NotSupported,
              "EpBuffer: at most " << ep::kMaxRanks << " ranks in a node, got " << W);
  if (config_.num_sms == 0) config_.num_sms = config_.mode == EpMode::kHighThroughput ? 24 : comm_.num_sms();
  config_.num_sms = std::min(config_.num_sms, comm_.num_sms());
  ep::check_layout_fits(config_.max_tokens_per_rank, config_.num_experts, comm_.num_sms());

  const int T = config_.max_tokens_per_rank, H = config_.hidden, K = config_.topk, E = config_.num_experts;
  const int Le = E / W;
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
  p.capacity_per_expert = ll ? int64_t{W} * T : 0;
  p.capacity_rows = ll ? int64_t{Le} * W * T
                       : (config_.max_recv_rows > 0 ? config_.max_recv_rows : ep::worst_case_recv_rows(config_, W));
  p.meta_bytes = ep::meta_record_bytes(K);
  p.num_blocks = config_.num_sms;
  // Chunks: few tokens (low-latency) need a row spread over many warps; many
  // tokens keep whole-ish rows per warp (fewer ready words).
  // 4xH200: HT whole 7168-column rows beat 2048/3584; LL 2048 beat 256/512/1024.
  const int default_chunk = ll ? 2048 : 8192;
  p.chunk_cols = std::max(256, env_int("FERRY_EP_CHUNK_COLS", default_chunk) / 256 * 256);
  p.num_chunks = (H + p.chunk_cols - 1) / p.chunk_cols;
  // dispatch()/combine() run both halves at once on two streams (the receive
  // half consumes tokens as they land): receive blocks + send blocks = num_sms.
  // Measured on 4xH200 (T=4096, H=7168, 24 SMs): dispatch is bound by the
  // receive half (it writes every expert row), combine by the send half (it
  // reads every expert row), so each gets the larger share there.
  const int clamp_max = std::max(1, config_.num_sms - 1);
  state_->dispatch_recv_blocks =
      std::clamp(env_int("FERRY_EP_DISPATCH_RECV_BLOCKS", config_.num_sms * 2 / 3), 1, clamp_max);
  state_->combine_recv_blocks =
      std::clamp(env_int("FERRY_EP_COMBINE_RECV_BLOCKS", config_.num_sms / (ll ? 2 : 3)), 1, clamp_max);
  state_->overlap = config_.num_sms >= 2 && env_int("FERRY_EP_OVERLAP", 1) != 0;
  state_->fuse_layout = env_int("FERRY_EP_FUSE_LAYOUT", 1) != 0;
  p.spread_items = env_int("FERRY_EP_SPREAD_ITEMS", 1) != 0;  // NOTE [EP item order]; 0: block-major (to compare)
  p.wait = WaitContext{comm_.device_error_state(), comm_.device_abort_flag(), comm_.timeout_ns(), comm_.rank()};

  // Symmetric: the dispatch output (senders write rows there), routing records,
  // counts, combine staging, ready words, flags.
  Carve sym;
  const size_t out_tokens_at = sym.take(size_t(p.capacity_rows) * H * (fp8 ? 1 : 2));
  const size_t out_scales_at = sym.take(fp8 ? sizeof(float) * size_t(p.capacity_rows) * (H / ep::kScaleBlock) : 0);
  const size_t meta_at = sym.take(size_t(W) * T * p.meta_bytes);
  const size_t counts_at = sym.take(sizeof(int32_t) * 2 * W * (E + W));
  const size_t combine_at = sym.take(size_t(W) * T * H * 2);
  const size_t combine_ready_at = sym.take(sizeof(uint64_t) * size_t(W) * T * p.num_chunks);
  const size_t stage_ready_at = sym.take(sizeof(uint64_t) * size_t(W) * T * p.num_chunks);
  const size_t flags_at = sym.take(sizeof(uint64_t) * ep::kNumFlagSlots);
  state_->symmetric = comm_.heap().allocate(sym.total);
  // Peer tables by rank in the node: one node (checked above), so entry r is global rank r.
  const std::vector<int>& ranks = comm_.topology().ranks_in_node;
  const SymmetricBuffer& b = state_->symmetric;
  p.peer_out_tokens = peer_ptrs<uint8_t>(b, ranks, out_tokens_at);
  p.peer_out_scales = fp8 ? peer_ptrs<float>(b, ranks, out_scales_at) : device::PeerPtrs<float>{};
  p.stage_meta = peer_ptrs<uint8_t>(b, ranks, meta_at);
  p.counts = peer_ptrs<int32_t>(b, ranks, counts_at);
  p.combine_stage = peer_ptrs<uint8_t>(b, ranks, combine_at);
  p.combine_ready = peer_ptrs<uint64_t>(b, ranks, combine_ready_at);
  p.stage_ready = peer_ptrs<uint64_t>(b, ranks, stage_ready_at);
  p.flags = device::PeerFlags{peer_ptrs<uint64_t>(b, ranks, flags_at), p.rank, W};

  // Local: layout, receive side, outputs, epochs.
  Carve loc;
  const size_t token_slot_at = loc.take(sizeof(int32_t) * size_t(T) * W);
  const size_t pos_at = loc.take(sizeof(int32_t) * size_t(T) * K);
  const size_t token_expert_at = loc.take(sizeof(int32_t) * size_t(T) * K);
  const size_t send_expert_at = loc.take(sizeof(int32_t) * E);
  const size_t send_token_at = loc.take(sizeof(int32_t) * W);
  const size_t layout_error_at = loc.take(sizeof(int32_t));
  const size_t layout_totals_at =
      loc.take(sizeof(int32_t) * size_t((T + ep::kLayoutThreads - 1) / ep::kLayoutThreads) * (E + W + 1));
  const size_t layout_barrier_at = loc.take(2 * sizeof(unsigned));
  const size_t slot_rows_at = loc.take(sizeof(int32_t) * size_t(W) * T * K);
  const size_t slot_src_at = loc.take(sizeof(int32_t) * size_t(W) * T);
  const size_t recv_token_at = loc.take(sizeof(int32_t) * W);
  const size_t out_weights_at = loc.take(config_.with_weights ? sizeof(float) * size_t(p.capacity_rows) : 0);
  const size_t expert_counts_at = loc.take(sizeof(int32_t) * Le);
  const size_t expert_offsets_at = loc.take(sizeof(int64_t) * (Le + 1));
  const size_t epochs_at = loc.take(sizeof(ep::Epochs));
  FERRY_CUDA_CHECK(cudaMalloc(&state_->local, loc.total));
  auto* l = static_cast<uint8_t*>(state_->local);
  p.token_slot = reinterpret_cast<int32_t*>(l + token_slot_at);
  p.pos_in_expert = reinterpret_cast<int32_t*>(l + pos_at);
  p.token_expert = reinterpret_cast<int32_t*>(l + token_expert_at);
  p.send_expert_count = reinterpret_cast<int32_t*>(l + send_expert_at);
  p.send_token_count = reinterpret_cast<int32_t*>(l + send_token_at);
  p.layout_error = reinterpret_cast<int32_t*>(l + layout_error_at);
  p.layout_block_totals = reinterpret_cast<int32_t*>(l + layout_totals_at);
  p.layout_barrier = reinterpret_cast<unsigned*>(l + layout_barrier_at);
  p.slot_rows = reinterpret_cast<int32_t*>(l + slot_rows_at);
  p.slot_src_token = reinterpret_cast<int32_t*>(l + slot_src_at);
  p.recv_token_count = reinterpret_cast<int32_t*>(l + recv_token_at);
  p.out_tokens = p.peer_out_tokens[p.rank];
  p.out_scales = p.peer_out_scales[p.rank];
  p.out_weights = config_.with_weights ? reinterpret_cast<float*>(l + out_weights_at) : nullptr;
  p.expert_counts = reinterpret_cast<int32_t*>(l + expert_counts_at);
  p.expert_offsets = reinterpret_cast<int64_t*>(l + expert_offsets_at);
  p.epochs = reinterpret_cast<ep::Epochs*>(l + epochs_at);
  // Everything but the weights starts zeroed (epochs, counts); weights are
  // written before they are read.
  FERRY_CUDA_CHECK(cudaMemset(l, 0, out_weights_at));
  FERRY_CUDA_CHECK(cudaMemset(l + expert_counts_at, 0, loc.total - expert_counts_at));

  FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&state_->status), sizeof(ep::EpStatus),
                                 cudaHostAllocMapped));
  std::memset(const_cast<ep::EpStatus*>(state_->status), 0, sizeof(ep::EpStatus));
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&state_->status_device), state_->status, 0));
  p.status = state_->status_device;
  FERRY_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&state_->host_offsets), sizeof(int64_t) * (Le + 1)));
  FERRY_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&state_->host_counts), sizeof(int32_t) * Le));
  FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->side, cudaStreamNonBlocking));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&state_->fork, cudaEventDisableTiming));
  FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&state_->join, cudaEventDisableTiming));
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  comm_.bootstrap().barrier();  // every rank's memory is ready before anyone dispatches
}

EpBuffer::~EpBuffer() {
  if (!state_) return;
  // Symmetric memory is released with the heap (collective release is not safe
  // in a destructor).
  if (state_->local) cudaFree(state_->local);
  if (state_->status) cudaFreeHost(state_->status);
  if (state_->host_offsets) cudaFreeHost(state_->host_offsets);
  if (state_->host_counts) cudaFreeHost(state_->host_counts);
  if (state_->side) cudaStreamDestroy(state_->side);
  if (state_->fork) cudaEventDestroy(state_->fork);
  if (state_->join) cudaEventDestroy(state_->join);
}

int EpBuffer::local_experts() const { return config_.num_experts / comm_.size(); }
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
  const char* where = "EpBuffer::dispatch";
  FERRY_ARG_CHECK(st.stage != Stage::kDispatchSent && st.stage != Stage::kCombineSent,
                  where << ": called while a " << (st.stage == Stage::kDispatchSent ? "dispatch" : "combine")
                        << " is half done (call its receive half first)");
  const bool reusing = options.reuse != nullptr;
  if (reusing) {
    FERRY_ARG_CHECK(options.reuse->generation != 0 && options.reuse->generation == st.generation,
                    where << ": the reused handle is not this buffer's latest layout");
  }
  const ep::DispatchCall call = ep::validate_dispatch(config_, tokens, topk_idx, topk_weights, scales, reusing);
  if (reusing)
    FERRY_ARG_CHECK(call.num_tokens == options.reuse->num_tokens,
                    where << ": the reused handle routes " << options.reuse->num_tokens << " tokens, got "
                          << call.num_tokens);
  const int device = comm_.device();
  check_on_device(where, "tokens", tokens, device);
  check_on_device(where, "scales", scales, device);
  if (!reusing) check_on_device(where, "topk_idx", topk_idx, device);
  check_on_device(where, "topk_weights", topk_weights, device);

  Params p = st.base;
  p.num_tokens = call.num_tokens;
  p.fp8_in = call.fp8_input;
  p.idx_int64 = call.idx_is_int64;
  p.with_weights = call.has_weights;
  p.tokens = tokens.data;
  p.scales_in = static_cast<const float*>(scales.data);
  p.topk_idx = topk_idx.data;
  p.topk_weights = static_cast<const float*>(topk_weights.data);
  if (st.send_blocks > 0) p.num_blocks = st.send_blocks;
  // Tokens that fit one layout block: the send kernel does the layout (NOTE [EP fused layout]).
  p.fuse_layout = !reusing && call.num_tokens <= ep::kLayoutThreads && st.fuse_layout;
  if (!reusing && !p.fuse_layout) ep::launch_layout(p, stream);
  ep::launch_dispatch_send(p, stream);
  if (!reusing) {
    ++st.generation;
    st.num_tokens = call.num_tokens;
  }
  st.with_weights = call.has_weights;
  st.stage = Stage::kDispatchSent;
  st.synced_rows = -1;
  return EpHandle{st.generation, st.num_tokens, st.with_weights};
}

DispatchResult EpBuffer::dispatch_recv(const EpHandle& handle, cudaStream_t stream, const DispatchOptions& options) {
  State& st = *state_;
  const char* where = "EpBuffer::dispatch_recv";
  FERRY_ARG_CHECK(st.stage == Stage::kDispatchSent, where << ": no dispatch_send to receive");
  FERRY_ARG_CHECK(handle.generation == st.generation, where << ": the handle is not the latest dispatch's");
  Params p = st.base;
  p.num_tokens = st.num_tokens;
  p.with_weights = st.with_weights;
  if (st.recv_blocks > 0) p.num_blocks = st.recv_blocks;
  ep::launch_dispatch_recv(p, stream);
  st.stage = Stage::kDispatched;

  const int Le = p.local_experts;
  DispatchResult r;
  r.tokens = p.out_tokens;
  r.scales = p.out_scales;
  r.weights = st.with_weights ? p.out_weights : nullptr;
  r.expert_counts = p.expert_counts;
  r.expert_offsets = p.expert_offsets;
  r.local_experts = Le;
  r.capacity_per_expert = p.capacity_per_expert;
  r.capacity_rows = p.capacity_rows;
  r.handle = handle;
  if (config_.mode == EpMode::kHighThroughput && options.sync_counts && !st.defer_sync) sync_counts(r, stream);
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
  comm_.synchronize(stream);
  check_errors();  // a bad expert id or too many rows, found by the kernels
  r.num_rows = st.host_offsets[Le];
  r.host_expert_counts.assign(st.host_counts, st.host_counts + Le);
  st.synced_rows = r.num_rows;
}

DispatchResult EpBuffer::dispatch(const TensorView& tokens, const TensorView& topk_idx,
                                  const TensorView& topk_weights, const TensorView& scales, cudaStream_t stream,
                                  const DispatchOptions& options) {
  State& st = *state_;
  if (!st.overlap) {
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    return dispatch_recv(handle, stream, options);
  }
  DispatchResult r;
  {
    State::Overlap overlap(st, config_.num_sms, st.dispatch_recv_blocks);
    FERRY_CUDA_CHECK(cudaEventRecord(st.fork, stream));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(st.side, st.fork, 0));
    const EpHandle handle = dispatch_send(tokens, topk_idx, topk_weights, scales, stream, options);
    r = dispatch_recv(handle, st.side, options);
    FERRY_CUDA_CHECK(cudaEventRecord(st.join, st.side));
    FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, st.join, 0));
  }
  if (config_.mode == EpMode::kHighThroughput && options.sync_counts) sync_counts(r, stream);
  return r;
}

void EpBuffer::combine_send(const TensorView& expert_outputs, const EpHandle& handle, cudaStream_t stream) {
  check_errors();
  State& st = *state_;
  const char* where = "EpBuffer::combine";
  FERRY_ARG_CHECK(handle.generation != 0 && handle.generation == st.generation,
                  where << ": the handle is not this buffer's latest dispatch (an EpBuffer keeps one layout)");
  FERRY_ARG_CHECK(st.stage == Stage::kDispatched,
                  where << ": " << (st.stage == Stage::kCombineSent ? "combine_send called twice"
                                                                   : "no completed dispatch to combine"));
  FERRY_ARG_CHECK(expert_outputs.given(), where << ": expert_outputs is null");
  ep::validate_combine(config_, comm_.size(), expert_outputs, std::max<int64_t>(st.synced_rows, 0), TensorView{},
                       st.num_tokens);
  check_on_device(where, "expert_outputs", expert_outputs, comm_.device());
  Params p = st.base;
  p.num_tokens = st.num_tokens;
  p.with_weights = st.with_weights;
  p.expert_outputs = expert_outputs.data;
  if (st.send_blocks > 0) p.num_blocks = st.send_blocks;
  ep::launch_combine_send(p, stream);
  st.stage = Stage::kCombineSent;
}

void EpBuffer::combine_recv(const EpHandle& handle, const TensorView& out, cudaStream_t stream) {
  State& st = *state_;
  const char* where = "EpBuffer::combine_recv";
  FERRY_ARG_CHECK(st.stage == Stage::kCombineSent, where << ": no combine_send to receive");
  FERRY_ARG_CHECK(handle.generation == st.generation, where << ": the handle is not the latest dispatch's");
  FERRY_ARG_CHECK(!out.empty() || st.num_tokens == 0, where << ": out is null (" << st.num_tokens << " tokens)");
  if (out.given()) {
    ep::validate_combine(config_, comm_.size(), TensorView{}, 0, out, st.num_tokens);
    check_on_device(where, "out", out, comm_.device());
  }
  Params p = st.base;
  p.num_tokens = st.num_tokens;
  p.combine_out = const_cast<void*>(out.data);
  if (st.recv_blocks > 0) p.num_blocks = st.recv_blocks;
  ep::launch_combine_recv(p, stream);
  st.stage = Stage::kDispatched;
}

void EpBuffer::combine(const TensorView& expert_outputs, const EpHandle& handle, const TensorView& out,
                       cudaStream_t stream) {
  // Checked before the send half so a bad `out` fails before any communication.
  FERRY_ARG_CHECK(handle.generation != 0 && handle.generation == state_->generation,
                  "EpBuffer::combine: the handle is not this buffer's latest dispatch (an EpBuffer keeps one layout)");
  if (out.given())
    ep::validate_combine(config_, comm_.size(), TensorView{}, 0, out, handle.num_tokens);
  check_on_device("EpBuffer::combine", "out", out, comm_.device());
  State& st = *state_;
  if (!st.overlap) {
    combine_send(expert_outputs, handle, stream);
    combine_recv(handle, out, stream);
    return;
  }
  State::Overlap overlap(st, config_.num_sms, st.combine_recv_blocks);
  FERRY_CUDA_CHECK(cudaEventRecord(st.fork, stream));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(st.side, st.fork, 0));
  combine_send(expert_outputs, handle, stream);
  combine_recv(handle, out, st.side);
  FERRY_CUDA_CHECK(cudaEventRecord(st.join, st.side));
  FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, st.join, 0));
}

}  // namespace ferry
