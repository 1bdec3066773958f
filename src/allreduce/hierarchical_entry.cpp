// The hierarchical AllReduce's table entry (ranks in several nodes of equal
// size): which communicators it runs on, its setup (a Window, NOTE
// [Hierarchical AllReduce setup]) and its call, split into the launches its
// window carries. The kernel is in hierarchical.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "allreduce/hierarchical.hpp"
#include "allreduce/allreduce_params.hpp"
#include "common/knobs.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/window.hpp"

namespace ferry::allreduce {

namespace {

struct HierarchicalState final : AlgorithmState {
  std::unique_ptr<Window> window;
  EpochState* epoch = nullptr;  // then the launch count of every block (HierarchicalParams)
  HierarchicalParams params{};  // all but the call's pointers and count
  size_t capacity = 0;          // user bytes per launch
  int max_blocks = 0;           // most blocks per launch, the same on every rank

  ~HierarchicalState() override {
    window.reset();  // waits for this rank's kernels and transfers
    if (epoch != nullptr) cudaFree(epoch);
  }
  size_t window_bytes() const override { return window ? window->bytes() : 0; }
};

// Several nodes, each with the same number of ranks, within the kernel's tables
// (checked on every call: the message is only written when one fails).
std::string hierarchical_unsupported(const CommShape& comm) {
  const bool equal = comm.ranks_per_node > 0 && comm.num_nodes * comm.ranks_per_node == comm.world_size;
  const bool nodes_fit = comm.num_nodes >= 2 && comm.num_nodes <= kMaxNodes;
  if (equal && nodes_fit && comm.ranks_per_node <= kMaxNodeRanks) return "";
  std::ostringstream why;
  if (!equal)
    why << "AllReduce across nodes (hierarchical) needs the same number of ranks in every node; the "
        << comm.world_size << " ranks span " << comm.num_nodes << " nodes of different sizes";
  else if (!nodes_fit)
    why << "AllReduce across nodes (hierarchical) supports 2 to " << kMaxNodes << " nodes, got " << comm.num_nodes;
  else
    why << "AllReduce across nodes (hierarchical) supports at most " << kMaxNodeRanks << " ranks in a node, got "
        << comm.ranks_per_node;
  return why.str();
}

// Collective, one all-gather: the pieces and the most blocks per launch, the
// same on every rank (the smallest choices).
// Pieces (NOTE [Hierarchical AllReduce in pieces]) where every rank maps the
// landing buffer and the signal words of each of its node peers, else 1 (one
// put with a signal per block and node, through the proxy where it must).
// Blocks: where every node peer's landing is mapped here (stores over PCIe, NOTE
// [Mapped peers]), more blocks keep more host-memory reads in flight: 32
// measured 0.93-0.95 of 16's time over UCX shared memory on 2x H100 (1-64 MB),
// and in pieces 64 (hierarchical_blocks). Where the proxy moves the data, each
// block is one more put per launch: 16; over tcp alone 4, since there each put
// with its signal costs far more than its bytes (2x H100, 2 virtual nodes over
// loopback tcp, session 28 c6, 3 rounds: 4 blocks took 0.54 / 0.78 / 0.97 / 1.00 of
// 16's time at 1M / 4M / 16M / 64M), and over tcp alone one block per 256 KiB of
// shard, not 64 KiB, for the same reason (session 29 c2, 3 rounds: 0.71 of the time
// at 256K, 1.06 / 1.00 / 0.94 / 0.97 at 1M-64M, tcp's noise; c1 on top of pieces:
// 0.79 / 0.88 / 0.96 / 0.96 / 0.96 at 256K-4M). A rank that would go in pieces alone
// maps everything, so its 64 never outlives another rank's 32 or 16.
struct LaunchShape {
  int32_t pieces;
  int32_t max_blocks;
  uint64_t block_bytes;  // one block per this many bytes of a shard (hierarchical_blocks)
};
LaunchShape hierarchical_launch_shape(Communicator& comm, const Window& window, const HierarchicalParams& p,
                                      const AllReduceOptions& options) {
  bool data_mapped = true, signals_mapped = true;
  for (int m = 0; m < p.num_nodes; ++m) {
    if (m == p.node) continue;
    data_mapped &= window.maps_peer(p.node_peers[m]);
    signals_mapped &= window.maps_peer_signals(p.node_peers[m]);
  }
  LaunchShape mine{data_mapped && signals_mapped ? static_cast<int32_t>(knobs::kHierarchicalPieces.value()) : 1, 0,
                   kHierarchicalBlockBytes};
  const bool tcp_only = comm.reaches_other_nodes_over_tcp_only();  // then no node peer is mapped
  const int64_t blocks_knob = knobs::kHierarchicalBlocks.value();
  const int most = blocks_knob > 0      ? static_cast<int>(std::min<int64_t>(blocks_knob, kHierarchicalMaxBlocks))
                   : mine.pieces > 1    ? kHierarchicalPiecesBlocks
                   : data_mapped        ? kHierarchicalMappedBlocks
                   : tcp_only           ? kHierarchicalTcpBlocks
                                        : kHierarchicalDefaultBlocks;
  const uint64_t block_bytes_knob = knobs::kHierarchicalBlockBytes.value();
  mine.block_bytes = block_bytes_knob > 0 ? block_bytes_knob
                     : tcp_only           ? kHierarchicalTcpBlockBytes
                                          : kHierarchicalBlockBytes;
  mine.max_blocks = std::min(most, std::max(comm.sm_budget(), 1));
  if (options.max_blocks > 0) mine.max_blocks = std::min(mine.max_blocks, options.max_blocks);
  LaunchShape all = mine;
  for (const LaunchShape& c : comm.bootstrap().all_gather_value(mine)) {
    all.pieces = std::min(all.pieces, c.pieces);
    all.max_blocks = std::min(all.max_blocks, c.max_blocks);
    all.block_bytes = std::min(all.block_bytes, c.block_bytes);
  }
  return all;
}

// NOTE [Hierarchical AllReduce setup]
// Only a communicator whose ranks span nodes (of equal size) gets the window, so
// a single-node AllReduce allocates exactly what it did before. Every rank must
// agree on the capacity per launch and the most blocks per launch (the layout
// and the grid of each launch depend on them): the smallest of every rank's
// choice. Every instantiation of the kernel is loaded here, before any of them
// can wait on the proxy: under lazy module loading, the first launch of another
// instantiation behind a running one (a bf16 call queued behind a float call,
// say) would load its module while the running kernel waits on the proxy, and
// the driver lock that takes stalls the proxy's CUDA calls (its staging copies):
// a hang until the timeout (docs/internode.md, "Lazy module loading").
std::unique_ptr<AlgorithmState> setup_hierarchical(Communicator& comm, size_t max_bytes,
                                                   const AllReduceOptions& options) {
  auto state = std::make_unique<HierarchicalState>();
  const Topology& topology = comm.topology();
  const int num_nodes = topology.num_nodes, local_size = topology.local_size;
  size_t capacity = hierarchical_capacity(max_bytes, num_nodes, local_size, knobs::kHierarchicalLaunchBytes.value());
  for (uint64_t c : comm.bootstrap().all_gather_value(uint64_t{capacity})) capacity = std::min<size_t>(capacity, c);
  state->capacity = capacity;
  const HierarchicalLayout layout = hierarchical_layout(capacity, num_nodes, local_size);
  load_hierarchical_kernels();
  state->window = std::make_unique<Window>(comm, layout.window_bytes, WindowOptions{kHierarchicalSignals});
  // The epoch, then the launch count of every block (HierarchicalParams).
  const size_t counters = sizeof(EpochState) + kHierarchicalMaxBlocks * sizeof(uint64_t);
  static_assert(sizeof(EpochState) % sizeof(uint64_t) == 0, "block counters are 8-byte aligned");
  FERRY_CUDA_CHECK(cudaMalloc(&state->epoch, counters));
  FERRY_CUDA_CHECK(cudaMemset(state->epoch, 0, counters));
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());

  HierarchicalParams& p = state->params;
  p = HierarchicalParams{};
  p.window = state->window->device();
  p.layout = layout;
  p.epoch = state->epoch;
  p.block_launches = reinterpret_cast<uint64_t*>(state->epoch + 1);
  p.world_size = topology.size;
  p.num_nodes = num_nodes;
  p.node = topology.node;
  p.local_size = local_size;
  p.local_rank = topology.local_rank;
  for (int q = 0; q < kMaxNodeRanks; ++q) p.local_peers[q] = q < local_size ? topology.ranks_in_node[q] : -1;
  for (int m = 0; m < kMaxNodes; ++m) p.node_peers[m] = -1;
  for (int r = 0; r < topology.size; ++r)
    if (topology.local_rank_of_rank[r] == topology.local_rank) p.node_peers[topology.node_of_rank[r]] = r;
  for (int m = 0; m < num_nodes; ++m)
    FERRY_CHECK(p.node_peers[m] >= 0, Error,
                "AllReduce: node " << m << " has no rank with local index " << topology.local_rank);
  const LaunchShape shape = hierarchical_launch_shape(comm, *state->window, p, options);
  p.pieces = shape.pieces;
  p.block_bytes = shape.block_bytes;
  state->max_blocks = shape.max_blocks;
  return state;
}

void run_hierarchical(AlgorithmState& own, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                      cudaStream_t stream) {
  const auto& state = static_cast<const HierarchicalState&>(own);
  const size_t elem = dtype_size(type);
  HierarchicalParams p = state.params;
  const size_t piece_elems = state.capacity / elem;  // a multiple of 16 bytes
  for (size_t done = 0; done < count; done += piece_elems) {
    p.count = std::min(piece_elems, count - done);
    p.in = static_cast<const char*>(in) + done * elem;
    p.out = static_cast<char*>(out) + done * elem;
    p.aligned = device_aligned(p.in) && device_aligned(p.out);
    launch_hierarchical(p, type, op, state.max_blocks, stream);
  }
}

}  // namespace

const AlgorithmEntry kHierarchicalEntry{
    kHierarchicalName, AllReduceAlgorithm::kHierarchical, /*internal=*/false, /*spans_nodes=*/true,
    {nullptr, nullptr}, &hierarchical_unsupported, nullptr, nullptr, nullptr, &setup_hierarchical,
    &run_hierarchical};

}  // namespace ferry::allreduce
