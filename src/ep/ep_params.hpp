// Host/device shared definitions of the EP kernels: the one Params struct every
// kernel takes, the symmetric-region layout and the launch entry points.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/device/timeout.cuh"

namespace ferry::ep {

// Ranks of one NVLink node: the size of a node region (channel.cuh), defined once
// there. The cross-node path (internode_params.hpp) keeps the same limit on the
// whole group: the layout holds a slot per destination rank in registers.
constexpr int kMaxRanks = device::kMaxNodeRanks;
constexpr int kMaxTopk = 16;
constexpr int kScaleBlock = 128;  // fp8: one fp32 scale per 128 columns
constexpr int kThreads = 1024;    // threads of every data kernel (32 warps)
constexpr int kWarps = kThreads / 32;
// Layout grid: one block per kLayoutThreads tokens (NOTE [EP layout scan]).
// Small blocks spread the routing scan over many SMs: it is a chain
// of dependent instructions per warp, so SMs, not threads, set its time.
constexpr int kLayoutThreads = 256;
constexpr int kMaxLayoutBlocks = 256;
constexpr int kMaxTokensPerRank = kMaxLayoutBlocks * kLayoutThreads;

// Flag words of one rank's flag region (uint64, they only grow; NOTE [EP epochs]).
// Each slot is a flag row of the channel's node part (NOTE [Flag rows] in
// ferry/device/channel.cuh): word row + r is written only by rank r.
// (A source's counts carry their own tags instead of a flag: NOTE [EP tagged counts] in destination_rows.cuh.)
enum FlagSlot : int {
  kCombineConsumed = 0,            // + home rank: home done reading the partials
  kRowsWritten = kMaxRanks,        // + source rank: all its rank rows of this dispatch written (NOTE [EP rank rows])
  // NOTE [EP zero-copy combine] (rank_rows_pull_combine.cu), + the rank holding the rows:
  kCombineInputReady = 2 * kMaxRanks,   // its rows of this combine written (the call's epoch)
  kCombineInputOffset = 3 * kMaxRanks,  // its first row from this rank (a row index, not an epoch)
  kNumFlagSlots = 4 * kMaxRanks,
};

// Device-local progress of one EpBuffer: launches completed per kernel kind.
struct Epochs {
  uint64_t dispatch_sent;
  uint64_t dispatch_received;
  uint64_t combine_sent;
  uint64_t combine_received;
  unsigned blocks_done[4];  // per kernel kind, for the last-block election
  unsigned combine_ticket;  // the one-role combine's next item (NOTE [EP combine one role]); 0 between launches
};
enum EpochKind : int { kDispatchSend = 0, kDispatchRecv = 1, kCombineSend = 2, kCombineRecv = 3 };

// Errors a kernel finds in this rank's input, for EpBuffer::check_errors.
// Lives in host-mapped memory; 0 = fine.
enum EpErrorCode : int32_t { kEpOk = 0, kEpBadExpert = 1, kEpTooManyRows = 2, kEpRepeatedExpert = 3 };
struct EpStatus {
  volatile int32_t code;
  volatile int32_t token;
  volatile int32_t k;
  volatile int32_t rank;   // kEpTooManyRows: the rank whose output would overflow
  volatile int64_t value;  // the bad expert id, or the rows needed
};

struct Params {
  // ---- shape
  int world_size;
  int rank;
  int num_tokens;        // this call's T' (<= max_tokens)
  int max_tokens;        // T: slots per source in the staging regions
  int hidden;
  int topk;
  int num_experts;
  int local_experts;
  int expert_alignment;  // high-throughput output
  bool low_latency;
  bool fp8_out;          // dispatch_type fp8
  bool fp8_in;           // tokens given in fp8
  bool idx_int64;
  bool with_weights;
  bool fuse_layout;      // the send kernel computes the layout (NOTE [EP fused layout])
  bool overlapped_receive;  // a receive grid launched while its send grid runs (NOTE [Overlapped halves and free SMs])
  bool spread_items;     // work items across blocks first (NOTE [EP item order])
  bool rank_rows;        // EpLayout::kRankRows (NOTE [EP rank rows])
  bool recv_in_send_grid;  // rank rows, dispatch(): the send grid does the receive half's work (NOTE [EP rank rows one grid])
  bool own_rows_first;   // rank rows: this rank's rows first, one per token (NOTE [EP own rows first])
  bool pair_layout;  // a fused layout may take one thread per (token, k) (NOTE [EP pair layout]); last: no field moves
  int64_t capacity_rows;        // rows of the output buffer
  int64_t capacity_per_expert;  // low-latency slab per expert
  int64_t index_capacity;       // rank rows: entries of the per-expert row lists (padding included)
  size_t meta_bytes;            // one token's routing record (the direct dispatch, meta_record_bytes)
  int num_blocks;               // grid of the launched kernel
  int chunk_cols;               // a token row moves in chunks of this many columns (multiple of 256)
  int num_chunks;               // ceil(hidden / chunk_cols)
  int rank_rows_local_blocks;   // rank-rows send blocks that write only this rank's rows (NOTE [EP rank rows by role])
  int own_rows_copied;          // own rows first: rows [0, this) hold data the copy engine writes (routing: the kernel's)

  // ---- user tensors
  const void* tokens;           // [T', H] bf16 or fp8
  const float* scales_in;       // fp8 input: [T', H/128]
  const void* topk_idx;         // [T', K]
  const float* topk_weights;    // [T', K] or nullptr
  const void* expert_outputs;   // bf16, dispatch output layout
  void* combine_out;            // bf16 [T', H]

  // ---- layout of this rank's tokens (local; the handle)
  int32_t* token_slot;          // [T][W]: slot at each destination, -1 if not sent
  int32_t* token_expert;        // [T][K]: checked expert ids (-1: none or bad)
  int32_t* pos_in_expert;       // [T][K]: index among this rank's tokens of that expert
  int32_t* send_expert_count;   // [E]
  int32_t* send_token_count;    // [W]
  int32_t* layout_error;        // device: non-zero when topk_idx held a bad id
  int32_t* layout_block_totals; // [kMaxLayoutBlocks][E + W + 1]: per layout block, then its bad entry

  // ---- receive side (local)
  int32_t* slot_rows;           // [W][T][K]: output row of each staged token's experts, -1; with weights, then
                                // [W][T][K] floats, their weights (slot_weights, NOTE [EP slot weights])
  int32_t* slot_src_token;      // [W][T]
  int32_t* recv_token_count;    // [W]
  uint8_t* out_tokens;          // dispatch output (this rank's part of the symmetric region)
  float* out_scales;            // fp8: [rows][H / 128]
  float* out_weights;
  int32_t* expert_counts;       // [Le]
  int64_t* expert_offsets;      // [Le + 1]
  int64_t* source_offsets;      // rank rows: [W + 1] first row of each source, then the end
  // Rank rows: this rank's part of the symmetric regions below.
  int32_t* out_row_experts;     // [capacity_rows][K]
  float* out_row_weights;       // [capacity_rows][K]
  int32_t* out_expert_rows;     // [index_capacity]

  // ---- symmetric regions of every rank, as mapped here (peer tables of the
  // channel layer's node part, indexed by rank in the node: EP groups are one node)
  device::NodeRegion<uint8_t> peer_out_tokens;  // dispatch output of every rank: senders write rows there
  device::NodeRegion<float> peer_out_scales;    // fp8 only (else all nullptr)
  device::NodeRegion<uint8_t> stage_meta;       // [W source][T slot][meta_bytes]: routing records (direct)
  device::NodeRegion<uint64_t> stage_ready;     // [W source][T][num_chunks]: epoch of the chunk's last write
  // [2 parity][W source][E + W]: rows per expert, then tokens per rank, each tagged (NOTE [EP tagged counts])
  device::NodeRegion<uint64_t> counts;
  device::NodeRegion<uint8_t> combine_stage;    // [W expert rank][T][H] bf16
  device::NodeRegion<uint64_t> combine_ready;   // [W expert rank][T][num_chunks]: epoch of the chunk's last write
  device::NodeFlags flags;                    // kNumFlagSlots words per rank (FlagSlot rows); rank, world_size
  // Rank rows (NOTE [EP rank rows]): senders write each row's routing and the index lists.
  device::NodeRegion<int32_t> peer_row_experts;  // [capacity_rows][K]
  device::NodeRegion<float> peer_row_weights;    // [capacity_rows][K]
  device::NodeRegion<int32_t> peer_expert_rows;  // [index_capacity]

  Epochs* epochs;
  EpStatus* status;             // host-mapped
  WaitContext wait;

  // NOTE [EP staged low latency] (staged_dispatch.cu): low latency inside a node, chunks through staging rows
  // ([2 parity][W source][T token][stage_row_bytes]: the row, its fp8 scales, its weights); ready words are
  // [2 parity][W][T] then, and the routing travels in boxes ([2 parity][W source][stage_box_bytes], StagedBox),
  // not records. Last, so that no field above moves.
  bool staged_rows;
  size_t stage_row_bytes;
  device::NodeRegion<uint8_t> stage_rows;
  size_t stage_box_bytes;
  device::NodeRegion<uint8_t> stage_boxes;
  // The call reuses a layout (DispatchOptions::reuse): topk_idx may be absent, token_expert holds the checked ids.
  bool reuses_layout;
  // NOTE [EP combine chunks]: the combine's chunking (ep_buffer.cpp); its launchers put these in chunk_cols and
  // num_chunks. Last, so that no field above moves.
  int combine_chunk_cols;
  int combine_num_chunks;
  // EpConfig::zero_copy_combine: the combine pulls the peers' rows from their combine_stage (NOTE [EP zero-copy
  // combine]). Last, so that no field above moves.
  bool zero_copy_combine;
};

// A source's routing box of NOTE [EP staged low latency] at one destination, in tagged 8-byte entries (NOTE [EP
// staged tagged boxes]: the call's epoch in the high 32 bits): the source's token count, then per token
// entry_count(K) entries of two expert ids each (16 bits apiece, ids 2j and 2j + 1 in entry j), 16-byte aligned
// (written two entries at a time). The weights travel in the staging rows (stage_row_bytes).
struct StagedBox {
  static constexpr size_t kEntriesOffset = 16;
  static constexpr int entry_count(int topk) { return (topk + 1) / 2; }
  // Id entries of a box: max_tokens x entry_count, rounded up to whole 16-byte units.
  static constexpr size_t id_entries(int max_tokens, int topk) {
    return (size_t(max_tokens) * entry_count(topk) + 1) / 2 * 2;
  }
  static constexpr size_t bytes(int max_tokens, int topk) {
    return kEntriesOffset + sizeof(uint64_t) * id_entries(max_tokens, topk);
  }
};

// The direct dispatch's routing record of one token: its index at the source, then
// per k the destination's local expert (-1: that expert lives elsewhere or none),
// the index among the source's tokens of that expert, and the weight (float
// bits). Chunk 0's sender writes it (NOTE [EP record once]).
inline size_t meta_record_bytes(int topk) {
  const size_t raw = sizeof(int32_t) * (1 + 3 * static_cast<size_t>(topk));
  return (raw + 15) / 16 * 16;
}

// One staging row of NOTE [EP staged low latency]: the row in the dispatch type, then (fp8) its scales, then the
// token's K weights (written with chunk 0), in whole 16-byte units.
constexpr size_t stage_weights_offset(int hidden, bool fp8) {
  return size_t(hidden) * (fp8 ? 1 : 2) + (fp8 ? sizeof(float) * size_t(hidden / kScaleBlock) : 0);
}
inline size_t stage_row_bytes(int hidden, bool fp8, int topk) {
  const size_t raw = stage_weights_offset(hidden, fp8) + sizeof(float) * size_t(topk);
  return (raw + 15) / 16 * 16;
}

// Experts of one EpConfig. It bounds the layout's and the dispatch receive
// half's shared memory below the 48 KB a kernel gets without opting in
// (static_asserts next to each kernel).
constexpr int kMaxExperts = 1024;

// Dynamic shared memory of layout_block (routing_layout.cuh) over `block_tokens`
// tokens: per-warp expert masks, then expert bases.
constexpr size_t layout_smem_bytes(int num_experts, int block_tokens = kLayoutThreads) {
  return sizeof(int32_t) * size_t((block_tokens + 31) / 32 + 1) * num_experts;
}
// NOTE [EP fused layout] (dispatch.cu): block 0 of a send kernel lays out a call
// of up to max_fused_layout_tokens(E) tokens itself, one thread per token (up to
// the block's kThreads), its masks in at most kFusedLayoutSmemBytes, so that with
// the send kernels' static arrays it stays in the 48 KB a kernel gets without
// opting in.
constexpr size_t kFusedLayoutSmemBytes = 40 * 1024;
constexpr int max_fused_layout_tokens(int num_experts) {
  const int warps = int(kFusedLayoutSmemBytes / (sizeof(int32_t) * size_t(num_experts))) - 1;
  return warps * 32 < kThreads ? warps * 32 : kThreads;
}
constexpr int fused_layout_block_tokens(int num_tokens) { return (num_tokens + 31) / 32 * 32; }
static_assert(layout_smem_bytes(kMaxExperts) <= kFusedLayoutSmemBytes, "a layout block of any expert count fits");

// NOTE [EP pair layout]: lanes per token (top-k rounded up to a power of two) and whether a one-block layout of
// `block_threads` threads may take one thread per (token, k): every pair has a thread and the per-warp masks fit.
constexpr int pair_layout_lanes(int topk) {
  int lanes = 1;
  while (lanes < topk) lanes <<= 1;
  return lanes;
}
constexpr bool pair_layout_fits(int num_tokens, int topk, int num_experts, int block_threads, size_t smem_limit) {
  return num_tokens * pair_layout_lanes(topk) <= block_threads &&
         layout_smem_bytes(num_experts, num_tokens * pair_layout_lanes(topk)) <= smem_limit;
}
static_assert(max_fused_layout_tokens(kMaxExperts) >= kLayoutThreads, "every expert count fuses a layout block");
constexpr size_t kDefaultSmemBytes = 48 * 1024;

// The send kernel quantizes bf16 tokens into fp8 rows (fp8 input travels as is).
inline bool quantizes(const Params& p) { return p.fp8_out && !p.fp8_in; }

void launch_layout(const Params& p, cudaStream_t stream);
void launch_dispatch_send(const Params& p, cudaStream_t stream);
void launch_dispatch_recv(const Params& p, cudaStream_t stream);
// NOTE [EP staged low latency] (staged_dispatch.cu; launch_dispatch_* call these where p.staged_rows).
void launch_staged_dispatch_send(const Params& p, cudaStream_t stream);
void launch_staged_dispatch_recv(const Params& p, cudaStream_t stream);
// Whether the staged receive's layout of every source (its shared memory) fits the shape; else the dispatch stays
// direct.
bool staged_receive_fits(int world_size, int num_experts, int max_tokens);
// one_role: NOTE [EP combine one role] (combine.cu); the send half then also takes p.combine_out.
// prefetch_max_blocks: one-role grids of at most this many blocks prefetch (NOTE [EP combine L2 prefetch]).
void launch_combine_send(const Params& p, cudaStream_t stream, bool one_role, int prefetch_max_blocks);
void launch_combine_recv(const Params& p, cudaStream_t stream, bool one_role);
// EpLayout::kRankRows (rank_rows_dispatch.cu, rank_rows_combine.cu).
void launch_rank_rows_dispatch_send(const Params& p, cudaStream_t stream);
void launch_rank_rows_dispatch_recv(const Params& p, cudaStream_t stream);
void launch_rank_rows_combine_send(const Params& p, cudaStream_t stream);
void launch_rank_rows_combine_recv(const Params& p, cudaStream_t stream);
// EpConfig::zero_copy_combine (rank_rows_pull_combine.cu, NOTE [EP zero-copy combine]).
void launch_rank_rows_pull_combine_send(const Params& p, cudaStream_t stream);
void launch_rank_rows_pull_combine_recv(const Params& p, cudaStream_t stream);

// Loads each kernel given now (its cudaFuncGetAttributes), for the functions below and their cross-node kin.
template <class... Kernels>
void load_kernels(Kernels... kernels) {
  const auto load = [](auto kernel) {
    cudaFuncAttributes attributes;
    FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  };
  (load(kernels), ...);
}

// Every kernel of the file, loaded now (cudaFuncGetAttributes). Under CUDA's lazy loading a kernel's first launch
// while another kernel holds the SMs waits for that kernel (docs/internode.md, "Lazy module loading"): a first
// combine_send() beside a user's running GEMM would, and EpRestrictedSms hung so (its hog never ends).
void load_dispatch_kernels();             // dispatch.cu
void load_staged_dispatch_kernels();      // staged_dispatch.cu
void load_combine_kernels();              // combine.cu
void load_rank_rows_dispatch_kernels();   // rank_rows_dispatch.cu
void load_rank_rows_combine_kernels();    // rank_rows_combine.cu
void load_rank_rows_pull_combine_kernels();  // rank_rows_pull_combine.cu
void load_layout_kernel();                // routing_layout.cu

}  // namespace ferry::ep
