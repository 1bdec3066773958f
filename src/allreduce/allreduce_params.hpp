// Host/device shared definitions of the AllReduce algorithms: the one Params
// struct every NVLink kernel takes, the epoch record, flag-row layout and the
// table entry of each algorithm (one file per algorithm defines its entry).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "allreduce/allreduce_args.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/types.hpp"

#ifdef __CUDACC__
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif

namespace ferry {
class Communicator;
}

namespace ferry::allreduce {

// Ranks of one node an AllReduce supports: the size of a node region (channel.cuh).
using device::kMaxNodeRanks;
constexpr int kMaxBlocks = 256; // largest grid of any algorithm (one flag row per block)
constexpr int kFlagRow = 2 * kMaxNodeRanks;  // uint64 flags per block: two phases x peers
constexpr size_t kFlagRegionWords = size_t{kMaxBlocks} * kFlagRow;
constexpr size_t kPackBytes = 16;

struct EpochState {
  uint64_t epoch;         // launches completed on this AllReduce
  unsigned blocks_done;   // blocks of the running launch that finished
  unsigned reserved;
};

struct Params {
  const void* in;
  void* out;
  size_t count;           // elements in this launch
  bool aligned;           // in and out are 16-byte aligned
  device::NodeRegion<char> scratch;  // this algorithm's scratch region of every rank (as mapped here)
  device::NodeFlags flags;         // this algorithm's flag region of every rank, this rank, world size
  size_t capacity_bytes;       // user bytes one launch may carry (the region was sized for it)
  EpochState* epoch;           // this rank's, local
  WaitContext wait;
  size_t chunk_packs;          // packs one block moves per step (two-shot)
  int variant;                 // algorithm-specific (two-shot: 0 pull, 1 push)

  // The group is the node (single-node AllReduce): rank and size as the peer
  // tables index them, kept once, in flags.
  FERRY_HOST_DEVICE int rank() const { return flags.rank; }
  FERRY_HOST_DEVICE int world_size() const { return flags.world_size; }
};

FERRY_HOST_DEVICE inline size_t packs_of(size_t count, size_t elem_size) {
  const size_t per_pack = kPackBytes / elem_size;
  return (count + per_pack - 1) / per_pack;
}
FERRY_HOST_DEVICE inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Launch tuning for measurements (FERRY_ONE_SHOT_*, FERRY_TWO_SHOT_*: src/common/knobs.hpp),
// read once when the AllReduce is built; 0: the built-in choice.
struct LaunchTuning {
  size_t one_shot_packs_per_thread = 0;
  size_t one_shot_blocks = 0;
  size_t one_shot_ll_blocks = 0;
  size_t one_shot_ll_threads = 0;
  size_t two_shot_blocks = 0;
  size_t two_shot_max_chunk_packs = 0;
  int two_shot_variant = 1;  // Params::variant: 0 pull, 1 push
  size_t one_shot_pipelined_step_packs = 0;
  bool dependent_launch = false;  // NOTE [AllReduce launches]
};
LaunchTuning launch_tuning_from_env();

// What an entry with memory of its own (one that spans nodes: a Window) keeps
// between calls; made by the entry's setup when the AllReduce is built.
class AlgorithmState {
 public:
  virtual ~AlgorithmState() = default;
  virtual size_t window_bytes() const = 0;
};

// One AllReduce algorithm (or protocol) as the host drives it: where it can run,
// and either its regions and launcher (inside a node, over NVLink) or its own
// memory and call (across nodes). Each algorithm's file defines its entry next
// to the kernel; allreduce.cpp lists them (NOTE [AllReduce regions] for the
// order). Entries are constant-initialized (function addresses and literals
// only), so their use from other translation units does not depend on static
// initialization order.
struct AlgorithmEntry {
  const char* name;                 // algorithm_name() of `algorithm` (internal entries: a label only)
  AllReduceAlgorithm algorithm;     // the public algorithm it runs
  bool internal;                    // a protocol run() picks for `algorithm` by size (one-shot LL),
                                    // never named by users
  bool spans_nodes;                 // runs only on ranks in several nodes (a Window: NVLink inside the
                                    // node, the proxy between nodes); else only inside one node (NVLink)
  std::array<const char*, 2> aliases;  // other names algorithm_from_string accepts (or nullptr)
  // Why it cannot run on a communicator of this shape, whose kind (one node or
  // several) matches spans_nodes: the NotSupported message; "" when it can.
  std::string (*unsupported)(const CommShape& comm);

  // Inside a node (spans_nodes false; nullptr otherwise):
  // the user bytes one launch may carry for an AllReduce of max_bytes,
  size_t (*capacity)(size_t max_bytes);
  // the scratch bytes (per rank) a capacity of `capacity` needs,
  size_t (*scratch_bytes)(size_t capacity, int world_size);
  // and one launch of p.count elements.
  void (*launch)(const Params& p, const LaunchTuning& tuning, DataType type, ReduceOp op, int num_sms,
                 cudaStream_t stream);

  // Across nodes (spans_nodes true; nullptr otherwise): its memory, made when
  // the AllReduce is built (collective), and a whole call (split into launches).
  std::unique_ptr<AlgorithmState> (*setup)(Communicator& comm, size_t max_bytes, const AllReduceOptions& options);
  void (*run)(AlgorithmState& state, const void* in, void* out, size_t count, DataType type, ReduceOp op,
              cudaStream_t stream);
};

// unsupported() of the entries that run inside one node on any number of its ranks.
std::string fits_one_node(const CommShape& comm);

inline bool device_aligned(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

extern const AlgorithmEntry kOneShotEntry;
extern const AlgorithmEntry kOneShotLlEntry;
extern const AlgorithmEntry kOneShotPipelinedEntry;
extern const AlgorithmEntry kOneShotLl128Entry;
// NOTE [LL128 lines] (one_shot_ll128.cu): a warp's unit is 30 packs in 4 lines of 128 bytes; the pack a lane
// carries (or half-carries) in its unit:
constexpr size_t kLl128UnitPacks = 30, kLl128UnitBytes = 512;
FERRY_HOST_DEVICE constexpr size_t ll128_lane_pack(int lane) {
  const int j = lane & 15;
  return size_t(lane >> 4) * 15 + size_t(j < 7 ? j : (j == 7 || j == 15) ? 14 : j - 1);
}
// One parity's slot of the LL128 scratch for calls up to `capacity` bytes: whole units, 256-byte aligned.
FERRY_HOST_DEVICE inline size_t ll128_slot_bytes(size_t capacity) {
  return round_up((capacity / kPackBytes + kLl128UnitPacks - 1) / kLl128UnitPacks * kLl128UnitBytes, 256);
}
// FERRY_ALLREDUCE_LL128_MAX_BYTES (6 MiB unset): two ranks' one-shot calls above the LL protocol's range and up to
// this size take the LL128 one-shot; 0: none.
size_t ll128_max_bytes();
extern const AlgorithmEntry kTwoShotEntry;
extern const AlgorithmEntry kRingEntry;
extern const AlgorithmEntry kRecursiveDoublingEntry;
extern const AlgorithmEntry kHierarchicalEntry;

}  // namespace ferry::allreduce
