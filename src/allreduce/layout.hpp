// Host/device shared definitions of the AllReduce algorithms: the one Params
// struct every kernel takes, the epoch record, flag-row layout and the registry
// entry of each algorithm (one file per algorithm defines its entry).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "ferry/allreduce.hpp"
#include "ferry/device/nvlink.cuh"
#include "ferry/device/timeout.cuh"
#include "ferry/types.hpp"

#ifdef __CUDACC__
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif

namespace ferry::allreduce {

// Ranks of one node an AllReduce supports: the NVLink channel's peer table size.
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
  device::PeerPtrs<char> scratch;  // this algorithm's scratch region of every rank (as mapped here)
  device::PeerFlags flags;         // this algorithm's flag region of every rank, this rank, world size
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

// Tuning knob from the environment (0 or unset: the built-in choice). Read once.
size_t tuning_knob(const char* name);

// One AllReduce algorithm (or protocol) as the host drives it: its region
// sizes, where it can run and its launcher. Each algorithm's .cu file defines
// its entry next to the kernel; allreduce.cpp lists them (the list's order is the
// order of the regions in scratch and flags, NOTE [AllReduce regions]). Entries
// are constant-initialized (function addresses and literals only), so their use
// from other translation units does not depend on static initialization order.
struct AlgorithmEntry {
  const char* name;                 // algorithm_name() of `algorithm` (internal entries: a label only)
  AllReduceAlgorithm algorithm;     // the public algorithm it runs
  bool internal;                    // a protocol run() picks for `algorithm` by size (one-shot LL),
                                    // never named by users
  std::array<const char*, 2> aliases;  // other names algorithm_from_string accepts (or nullptr)
  // The user bytes one launch may carry for an AllReduce of max_bytes.
  size_t (*capacity)(size_t max_bytes);
  // The scratch bytes (per rank) a capacity of `capacity` needs.
  size_t (*scratch_bytes)(size_t capacity, int world_size);
  // Whether it runs on `world_size` ranks of one node (at most kMaxNodeRanks).
  bool (*supported)(int world_size);
  void (*launch)(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);
};

inline bool any_world_size(int /*world_size*/) { return true; }

extern const AlgorithmEntry kOneShotEntry;
extern const AlgorithmEntry kOneShotLlEntry;
extern const AlgorithmEntry kTwoShotEntry;
extern const AlgorithmEntry kRingEntry;
extern const AlgorithmEntry kRecursiveDoublingEntry;

}  // namespace ferry::allreduce
