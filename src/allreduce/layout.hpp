// Host/device shared definitions of the AllReduce algorithms: the one Params
// struct every kernel takes, the epoch record, flag-row layout and the launch
// entry points (one file per algorithm implements them).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ferry/device/timeout.cuh"
#include "ferry/types.hpp"

#ifdef __CUDACC__
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif

namespace ferry::allreduce {

constexpr int kMaxRanks = 8;    // ranks of one node an AllReduce supports (an 8-GPU NVLink node)
constexpr int kMaxBlocks = 256; // largest grid of any algorithm (one flag row per block)
constexpr int kFlagRow = 2 * kMaxRanks;  // uint64 flags per block row: two phases x peers
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
  int world_size;
  int rank;
  bool aligned;           // in and out are 16-byte aligned
  char* scratch[kMaxRanks];    // this algorithm's scratch region of every rank (as mapped here)
  uint64_t* flags[kMaxRanks];  // this algorithm's flag region of every rank
  size_t capacity_bytes;       // user bytes one launch may carry (the region was sized for it)
  EpochState* epoch;           // this rank's, local
  WaitContext wait;
  size_t chunk_packs;          // packs one block moves per step (two-shot)
  int variant;                 // algorithm-specific (two-shot: 0 pull, 1 push)
};

FERRY_HOST_DEVICE inline size_t packs_of(size_t count, size_t elem_size) {
  const size_t per_pack = kPackBytes / elem_size;
  return (count + per_pack - 1) / per_pack;
}
FERRY_HOST_DEVICE inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Tuning knob from the environment (0 or unset: the built-in choice). Read once.
size_t tuning_knob(const char* name);

// Each algorithm: the user bytes one launch may carry for a given AllReduce
// capacity, the scratch bytes that needs, and its launcher.
size_t one_shot_capacity(size_t max_bytes);
size_t one_shot_scratch_bytes(size_t capacity, int world_size);
void launch_one_shot(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);

size_t one_shot_ll_capacity(size_t max_bytes);
size_t one_shot_ll_scratch_bytes(size_t capacity, int world_size);
void launch_one_shot_ll(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);

size_t two_shot_capacity(size_t max_bytes);
size_t two_shot_scratch_bytes(size_t capacity, int world_size);
void launch_two_shot(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);

size_t ring_capacity(size_t max_bytes);
size_t ring_scratch_bytes(size_t capacity, int world_size);
void launch_ring(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);

size_t recursive_doubling_capacity(size_t max_bytes);
size_t recursive_doubling_scratch_bytes(size_t capacity, int world_size);
void launch_recursive_doubling(const Params& p, DataType type, ReduceOp op, int num_sms, cudaStream_t stream);

}  // namespace ferry::allreduce
