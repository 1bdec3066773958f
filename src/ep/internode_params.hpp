// The cross-node EP path (an EpBuffer whose ranks span nodes): what its kernels
// take, the layout of its ferry::Window, and the launch entry points. The
// kernels (internode_dispatch.cu, internode_combine.cu) move data only through the device API
// (include/ferry/device/channel.cuh): put_with_signal / signal / wait_signal /
// recv_ptr, and stores through node_ptr (the window as mapped over NVLink) for peers of the node.
// Protocol: NOTE [EP across nodes] and NOTE [EP across nodes: reuse] in internode_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ep/ep_params.hpp"
#include "ferry/device/channel.cuh"

namespace ferry::ep {

// Signal words of the EP window (per source rank; NOTE [Window signals]). Each
// call adds 1 to its word at every peer (itself included), so after the n-th
// call of a kind a word holds n.
enum NetSignal : uint32_t {
  kSigDispatchData = 0,      // source -> destination: its dispatch records are in the inbox
  kSigDispatchConsumed = 1,  // destination -> source: done reading that source's dispatch inbox (hierarchical path)
  kSigCombineData = 2,       // expert rank -> home: its partial sums are in the home's inbox
  kSigCombineConsumed = 3,   // home -> expert rank: done reading that rank's partial sums (not direct low latency)
  kSigDispatchRange = 4,     // + k: source -> destination: range k of its dispatch records is in the inbox
                             // (NOTE [EP across nodes: pipelined ranges])
  kSigCombineRange = kSigDispatchRange + 64,  // + k: expert rank -> home: range k of its partial sums
  kNumNetSignals = kSigCombineRange + 64,
};
constexpr int kMaxNetRanges = kSigCombineRange - kSigDispatchRange;  // ranges of records per destination and call
constexpr uint64_t kMinRangeBytes = 512 * 1024;  // a range holds at least this many bytes (NOTE [EP across nodes: range size])
constexpr uint64_t kProxyRangeBytes = 4 << 20;   // ... where the proxy moves some peer's ranges

// Byte offsets into every rank's window (the same on every rank). Boxes are
// [2 parity][W peer] of one slot each:
//   dispatch inbox  [parity][source]:      header + records, written by the source
//   dispatch outbox [parity][destination]: what this rank puts to a destination of another node
//   combine inbox   [parity][expert rank]: partial sums, one bf16 row per slot
//   combine outbox  [parity][home]:        what this rank puts to a home of another node
// A dispatch slot: header (tokens, then the source's rows per expert for all E
// experts) then max_tokens records; a record: the routing record
// (meta_record_bytes), the row (dispatch type), fp8 scales.
struct NetLayout {
  // NOTE [EP across nodes: aligned records]: the three below are kRecordAlign multiples.
  uint64_t header_bytes;     // 16 + 4 E, rounded up
  uint64_t record_bytes;     // one token slot
  uint64_t row_offset;       // row data inside a record (meta_bytes rounded up)
  uint64_t scales_offset;    // fp8 scales inside a record
  uint64_t dispatch_slot;    // header + max_tokens records (256-byte multiple)
  // Ranges: set by set_net_ranges on the direct path (EpBuffer::init_cross_node); 0 elsewhere.
  uint32_t range_records;    // records per range (NOTE [EP across nodes: pipelined ranges])
  uint32_t max_ranges;       // ranges of max_tokens records: at most kMaxNetRanges
  uint32_t combine_range_rows;   // partial rows per combine range
  uint32_t combine_max_ranges;   // ranges of max_tokens rows: at most kMaxNetRanges
  uint32_t pipelined;        // 1: ranges (high throughput); 0: one box per destination and call (low latency)
  uint64_t dispatch_in, dispatch_out;
  uint64_t combine_slot;     // max_tokens * hidden * 2 (256-byte multiple)
  uint64_t combine_in, combine_out;
  uint64_t total;            // window bytes
};
// The alignment of a dispatch box's header, records and rows (NOTE [EP across nodes: aligned records]).
constexpr uint64_t kRecordAlign = 128;
// Header words (int32) of a dispatch slot.
constexpr int kHeaderTokens = 0;  // tokens in this slot
constexpr int kHeaderCounts = 4;  // [E]: the source's rows for every expert (the overflow check)

NetLayout net_layout(const Params& p);
// Sets the layout's ranges: at least min_range_bytes each (UINT64_MAX: one range per box), at most kMaxNetRanges.
void set_net_ranges(NetLayout& layout, const Params& p, uint64_t min_range_bytes);

// NOTE [EP across nodes: one waiter per grid] (internode_common.cuh): words in
// device memory through which block 0 hands what it waited for, or the headers
// it read, to the other blocks of its grid.
enum NetRelay : int {
  kRelayDispatchData = 0,
  kRelayDispatchHeaders = 1,
  kRelayCombineConsumed = 2,
  kRelayCombineData = 3,
  kRelayRanges = 4,  // + source: relay_word(epoch, ranges landed from that source) (NOTE [EP across nodes: pipelined ranges])
  kRelayCombineRanges = kRelayRanges + kMaxRanks,  // + expert rank: the same for combine's partial sums
  kNumRelays = kRelayCombineRanges + kMaxRanks,
};
struct NetRelays {
  uint64_t* flags;           // [kNumRelays], zeroed at creation: epochs (targets) relayed
  int32_t* headers;          // [W][kHeaderCounts + E]: every source's dispatch header, copied by block 0
  uint32_t* range_written;   // [W][kMaxNetRanges]: (record, chunk) items of a range written this call, sender side
  uint32_t* combine_range_written;  // [W][kMaxNetRanges]: the same for combine's (row, chunk) items
};
constexpr size_t net_relay_bytes(int world_size, int num_experts) {
  return sizeof(uint64_t) * kNumRelays + sizeof(int32_t) * size_t(world_size) * (kHeaderCounts + num_experts) +
         2 * sizeof(uint32_t) * size_t(world_size) * kMaxNetRanges;
}

struct NetParams {
  Params p;          // shape, local arrays (layout, receive side, outputs), epochs, status
  DeviceWindow w;    // the EP window
  NetLayout lay;
  NetRelays relay;   // NOTE [EP across nodes: one waiter per grid]
};

// Loads every cross-node kernel (and the layout kernel) now: a kernel loaded
// lazily behind one that waits on the proxy stalls the proxy (docs/internode.md,
// "Lazy module loading").
void load_net_kernels();           // internode_combine.cu: all of them
void load_net_dispatch_kernels();  // internode_dispatch.cu: the dispatch kernels and the layout kernel

void launch_net_dispatch_send(const NetParams& p, cudaStream_t stream);
void launch_net_dispatch_recv(const NetParams& p, cudaStream_t stream);
void launch_net_combine_send(const NetParams& p, cudaStream_t stream);
void launch_net_combine_recv(const NetParams& p, cudaStream_t stream);

// ---------------------------------------------------------------- hierarchical
// High-throughput EP across nodes of several ranks each (internode_hier.cuh,
// NOTE [EP hierarchical]): one put per token per destination node, to the rank
// of that node with the same local index (the forwarder), which forwards it
// over NVLink. Same window, the direct path's boxes plus the ones below.

// Signal words past the direct path's (NOTE [Window signals]: one writer each).
enum HierSignal : uint32_t {
  kSigForwardData = kNumNetSignals,  // source -> forwarder (another node): its forward box is in
  kSigCombineForward,                // expert rank -> forwarder (its node): partials in the combine-forward inbox
  kSigForwarded,                     // + source node: forwarder -> rank of its node: that source's inbox is filled
  kNumHierSignals = kSigForwarded + kMaxRanks,
};

// A forward box slot: header, then records. Header (int32): tokens per local
// rank of the destination node [kMaxRanks], the record count, then the
// source's rows for every one of the E experts (as in a dispatch header).
constexpr int kFwdHeaderTokens = 0;
constexpr int kFwdHeaderRecords = kMaxRanks;
constexpr int kFwdHeaderCounts = kMaxRanks + 4;
// A forward record: a prefix (int32: mask of the destination node's local
// ranks, then per local rank the token's slot there or -1), then a dispatch
// record whose routing record names global experts (-1: none).
constexpr int kFwdMask = 0;
constexpr int kFwdSlots = 1;
constexpr int kFwdPrefixWords = 12;  // 1 + kMaxRanks, rounded to 16 bytes
static_assert(1 + kMaxRanks <= kFwdPrefixWords && kFwdPrefixWords % 4 == 0, "forward prefix");

// Byte offsets of the hierarchical boxes, after NetLayout::total:
//   forward inbox  [parity][source node]: forward box of the same-index rank of that node (a put)
//   forward outbox [parity][destination node]: this rank's forward box for that node
//   combine-forward inbox [parity][local rank][source node]: one bf16 row per slot that
//     local rank received from the source (node, this local index); NVLink stores
// The node partial a forwarder sends a home uses the direct path's combine
// outbox [parity][home] and lands in the home's combine inbox [parity][forwarder].
struct HierLayout {
  uint64_t fwd_header_bytes;  // 4 (kFwdHeaderCounts + E), rounded to 16
  uint64_t fwd_record_bytes;  // prefix + NetLayout::record_bytes
  uint64_t fwd_slot;          // header + max_tokens records (256-byte multiple)
  uint64_t fwd_in, fwd_out;
  uint64_t cfwd_slot;         // max_tokens * hidden * 2 (256-byte multiple)
  uint64_t cfwd_in;
  uint64_t total;             // window bytes (direct boxes included)
};
HierLayout hier_layout(const Params& p, const NetLayout& base, int num_nodes, int ranks_per_node);

// Local arrays of the hierarchical path (one cudaMalloc, zeroed), int32 words.
struct HierLocalPlan {
  size_t fwd_count, fwd_index, fwd_records, fwd_record_count, blocks_done;
  size_t total;  // bytes
};
HierLocalPlan plan_hier_local(int max_tokens, int num_nodes);

struct HierParams {
  NetParams np;
  HierLayout hl;
  int32_t num_nodes, per_node, node, local;  // this rank's node and local index
  int32_t rank_at[kMaxRanks];                // [node * per_node + local] -> global rank
  int32_t node_of[kMaxRanks], local_of[kMaxRanks];
  int32_t* fwd_count;         // [num_nodes]: this rank's tokens for each node (forward records)
  int32_t* fwd_index;         // [max_tokens][num_nodes]: the token's record in the forward box to node m, or -1
  int32_t* fwd_records;       // [num_nodes][max_tokens][kFwdPrefixWords]: prefixes this rank forwarded, per source node
  int32_t* fwd_record_count;  // [num_nodes]: records forwarded per source node (last dispatch)
  unsigned* blocks_done;      // [2]: last-block election of the two forward kernels
};

void load_hier_kernels();
// dispatch send: forward indices, then the pack kernel; dispatch receive: the
// forward kernel, then the receive kernel. Combine: the same split.
void launch_hier_dispatch_send(const HierParams& p, cudaStream_t stream);
void launch_hier_dispatch_recv(const HierParams& p, cudaStream_t stream);
void launch_hier_combine_send(const HierParams& p, cudaStream_t stream);
void launch_hier_combine_recv(const HierParams& p, cudaStream_t stream);

}  // namespace ferry::ep
