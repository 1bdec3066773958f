// Hierarchical AllReduce (ranks in several nodes): its parameters, its window
// layout and its launcher. It runs on a ferry::Window (the device API of
// ferry/device/channel.cuh: NVLink inside the node, the proxy across nodes), so
// it does not take the NVLink kernels' Params: its AlgorithmEntry
// (hierarchical_entry.cpp) spans nodes and brings its own setup and call.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "allreduce/allreduce_params.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/types.hpp"

namespace ferry::allreduce {

constexpr const char* kHierarchicalName = "hierarchical";
// Nodes one hierarchical AllReduce spans (landing slots, the unrolled reduction).
constexpr int kMaxNodes = 16;
// Blocks per launch, at most. A launch uses fewer for small calls: one per
// kHierarchicalBlockBytes of a shard, so a small call makes one put per remote
// node, not one per block (every rank computes the same number from the call).
constexpr int kHierarchicalMaxBlocks = 64;      // signal words per phase (FERRY_HIERARCHICAL_BLOCKS)
constexpr int kHierarchicalDefaultBlocks = 16;  // most blocks per launch unless the knob says,
constexpr int kHierarchicalMappedBlocks = 32;   // and where every node peer is mapped (setup_hierarchical),
constexpr int kHierarchicalPiecesBlocks = 64;   // and where the launch goes in pieces (p.pieces > 1)
constexpr int kHierarchicalTcpBlocks = 4;       // and where the proxy puts over tcp alone (hierarchical_launch_shape)
constexpr size_t kHierarchicalBlockBytes = size_t{64} << 10;
// Over tcp alone a block per this many bytes of a shard (hierarchical_launch_shape).
constexpr size_t kHierarchicalTcpBlockBytes = size_t{256} << 10;
// In pieces, blocks past kHierarchicalMappedBlocks come one per this many bytes.
constexpr size_t kHierarchicalPiecesBlockBytes = size_t{128} << 10;
// Signal words per source rank in the window: one per (phase, block).
constexpr int kHierarchicalSignals = 3 * kHierarchicalMaxBlocks;
// The window stays within this many bytes (and as many again of pinned host
// memory where remote puts are staged), unless one launch's capacity needs more.
constexpr size_t kHierarchicalWindowBudget = size_t{64} << 20;
// The largest capacity of one launch (bigger calls are split).
constexpr size_t kHierarchicalMaxLaunchBytes = size_t{16} << 20;
constexpr size_t kHierarchicalSlotAlign = 256;

// Where each area lives in every rank's window (same offsets on every rank).
// A slot holds one shard at capacity: ceil(capacity / 16 / L) packs. L = ranks
// per node, N = nodes.
struct HierarchicalLayout {
  size_t slot_bytes;
  size_t input_offset;    // L - 1 slots (L > 1): this rank's input, cut into the shards of its local peers
  size_t full_offset;     // 1 slot (L > 1): this rank's shard, fully reduced, read by its local peers
  size_t partial_offset;  // 2 slots (launch parity): the node's partial of this rank's shard, put to other nodes
  size_t landing_offset;  // 2 x (N - 1) slots (parity, source node): the other nodes' partials land here
  size_t window_bytes;
};

// Input slot (in the window of local rank `owner`) holding shard `shard` (!= owner).
FERRY_HOST_DEVICE inline int hierarchical_input_slot(int shard, int owner) { return shard < owner ? shard : shard - 1; }
// Landing slot (in a rank of node `receiver`) of the partial from node `source` (!= receiver).
FERRY_HOST_DEVICE inline int hierarchical_landing_slot(int source, int receiver) {
  return source < receiver ? source : source - 1;
}

inline HierarchicalLayout hierarchical_layout(size_t capacity, int num_nodes, int local_size) {
  const size_t shard_packs = (capacity / kPackBytes + local_size - 1) / local_size;
  HierarchicalLayout l{};
  l.slot_bytes = round_up(std::max<size_t>(shard_packs, 1) * kPackBytes, kHierarchicalSlotAlign);
  const size_t local_slots = local_size > 1 ? static_cast<size_t>(local_size) : 0;  // L - 1 input + 1 full
  l.input_offset = 0;
  l.full_offset = local_size > 1 ? (local_slots - 1) * l.slot_bytes : 0;
  l.partial_offset = local_slots * l.slot_bytes;
  l.landing_offset = l.partial_offset + 2 * l.slot_bytes;
  l.window_bytes = l.landing_offset + 2 * static_cast<size_t>(num_nodes - 1) * l.slot_bytes;
  return l;
}

// The user bytes one launch carries (a multiple of 16, so the pieces of a split
// call keep the pointers' alignment): all of max_bytes up to 16 MiB, less where
// the window would pass kHierarchicalWindowBudget (many nodes, few ranks per
// node: the landing area is 2(N-1)/L times the capacity). `knob` > 0
// (FERRY_HIERARCHICAL_LAUNCH_BYTES) replaces the 16 MiB and the budget.
inline size_t hierarchical_capacity(size_t max_bytes, int num_nodes, int local_size, size_t knob) {
  const size_t want = round_up(max_bytes, kPackBytes);
  if (knob > 0) return std::max(kPackBytes, std::min(want, round_up(knob, kPackBytes)));
  // Window bytes per capacity byte: (local slots + 2 partial + 2(N-1) landing) / L.
  const size_t slots = (local_size > 1 ? static_cast<size_t>(local_size) : 0) + 2 * static_cast<size_t>(num_nodes);
  const size_t by_budget = kHierarchicalWindowBudget / slots * static_cast<size_t>(local_size) / 4096 * 4096;
  return std::max(kPackBytes, std::min({want, kHierarchicalMaxLaunchBytes, std::max<size_t>(by_budget, 4096)}));
}

// What the kernel takes (by value). Ranks are global; node and local indices
// come from the Topology.
struct HierarchicalParams {
  const void* in;
  void* out;
  size_t count;   // elements in this launch
  bool aligned;   // in and out are 16-byte aligned
  DeviceWindow window;
  HierarchicalLayout layout;
  EpochState* epoch;         // launches of this algorithm on this AllReduce (its own counter)
  uint64_t* block_launches;  // [kHierarchicalMaxBlocks]: launches that ran block b (device memory)
  int32_t world_size;
  int32_t num_nodes;
  int32_t node;
  int32_t local_size;
  int32_t local_rank;
  int32_t local_peers[kMaxNodeRanks];  // global rank of each local index of this node
  int32_t node_peers[kMaxNodes];       // global rank of (node m, this local index), for every node m
  int32_t pieces;  // 1: one put with a signal per block and node; > 1: NOTE [Hierarchical AllReduce in pieces]
  uint64_t block_bytes;  // a launch takes one block per this many bytes of a shard (hierarchical_blocks)
};

// Blocks one launch of `count` elements of `elem_size` bytes uses (the same on every rank).
inline int hierarchical_blocks(size_t count, size_t elem_size, int local_size, int max_blocks, bool in_pieces,
                               size_t block_bytes = kHierarchicalBlockBytes) {
  if (block_bytes == 0) block_bytes = kHierarchicalBlockBytes;
  const size_t shard_bytes = (packs_of(count, elem_size) + local_size - 1) / local_size * kPackBytes;
  size_t want = (shard_bytes + block_bytes - 1) / block_bytes;
  // In pieces (NOTE [Hierarchical AllReduce in pieces]) a chunk of at least 128 KiB keeps its pieces:
  // 32 blocks up to a 4 MiB shard, then one block per 128 KiB (2x H100 over UCX shared memory, session
  // 19 c4: 64 blocks took 8-16 MiB in 0.90-0.93 of 32's time, 4 MiB in 1.10).
  if (in_pieces)
    want = std::max(std::min<size_t>(want, kHierarchicalMappedBlocks),
                    (shard_bytes + kHierarchicalPiecesBlockBytes - 1) / kHierarchicalPiecesBlockBytes);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, static_cast<size_t>(max_blocks))));
}

// Launches one piece (p.count elements) on at most `max_blocks` blocks
// (hierarchical_blocks; max_blocks is the same on every rank).
void launch_hierarchical(const HierarchicalParams& p, DataType type, ReduceOp op, int max_blocks,
                         cudaStream_t stream);

// Loads every instantiation of the kernel (cudaFuncGetAttributes), so that no
// launch loads a module while another of these kernels waits on the proxy
// (docs/internode.md, "Lazy module loading").
void load_hierarchical_kernels();

}  // namespace ferry::allreduce
