// One-shot AllReduce: every rank pushes its input into its slot of every peer's
// scratch, raises one flag per peer, waits for the peers' flags and reduces all
// slots locally in rank order. One flag exchange per call: the lowest latency,
// at the price of (n-1) x the data on every link; used for small buffers.
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 512;
constexpr size_t kMaxLaunchBytes = size_t{2} << 20;
constexpr size_t kSlotAlign = 256;
constexpr size_t kMaxOneShotBlocks = 64;

// NOTE [One-shot buffer reuse]
// Rank p's data for launch e lands in slot p of parity (e & 1) of each peer q.
// q may still be reducing launch e when p (which already has everything it needs)
// starts launch e+1, so e+1 writes the other parity. p can only reach launch e+2
// after receiving q's data of e+1, which q sends after finishing launch e: by then
// parity (e & 1) of q is free again. Blocks pair up by index (block b of every
// rank owns the same pack range), so each block raises and waits its own flags.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) one_shot_kernel(Params p) {
  start_launch();  // NOTE [AllReduce launches]
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  const uint64_t epoch = read_epoch(p.epoch);
  const int world = p.world_size(), me = p.rank();
  const size_t slot_bytes = round_up(p.capacity_bytes, kSlotAlign);
  const size_t parity_offset = (epoch & 1) * world * slot_bytes;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  size_t begin, end;
  split_range(num_packs, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);

  // 1. Push this rank's packs into its slot of every peer.
  const size_t my_slot = parity_offset + me * slot_bytes;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const uint4 v = load_user_pack(in, i, p.count, p.aligned);
#pragma unroll
    for (int q = 0; q < kMaxNodeRanks; ++q)
      if (q < world && q != me) device::store16(p.scratch.at(q) + my_slot + i * kPackBytes, v);
  }
  __syncthreads();
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  p.flags.block_signal_row(row, epoch, /*include_self=*/false);
  const bool ok = p.flags.block_wait_row(row, epoch, p.wait, kPhaseOneShotExchange, /*include_self=*/false, &failed);

  // 2. Reduce every slot in rank order (same order on every rank: identical bits).
  if (ok) {
    const char* local = p.scratch.at(me) + parity_offset;
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      uint4 raw[kMaxNodeRanks];
#pragma unroll
      for (int r = 0; r < kMaxNodeRanks; ++r) {
        if (r < world) {
          raw[r] = (r == me) ? load_user_pack(in, i, p.count, p.aligned)
                             : device::load16(local + r * slot_bytes + i * kPackBytes);
        }
      }
      store_user_pack(out, i, p.count, p.aligned, reduce_in_rank_order<T, Op>(raw, world));
    }
  }
  finish_epoch(p.epoch);
}

size_t one_shot_capacity(size_t max_bytes) { return round_up(std::min(max_bytes, kMaxLaunchBytes), kPackBytes); }

size_t one_shot_scratch_bytes(size_t capacity, int world_size) {
  return 2 * static_cast<size_t>(world_size) * round_up(capacity, kSlotAlign);
}

void launch_one_shot(const Params& p, const LaunchTuning& tuning, DataType type, ReduceOp op, int num_sms,
                     cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    const size_t packs = packs_of(p.count, sizeof(T));
    // About one pack per thread up to kMaxOneShotBlocks blocks: latency matters
    // more than SM count here, and on 4xH200 grids of 128+ blocks ran 5x slower
    // at 2 MB (ferry-bench, FERRY_ONE_SHOT_PACKS_PER_THREAD sweep).
    const size_t knob_ppt = tuning.one_shot_packs_per_thread;
    const size_t knob_blocks = tuning.one_shot_blocks;
    const size_t per_block = kThreads * (knob_ppt ? knob_ppt : 1);
    const size_t want = (packs + per_block - 1) / per_block;
    const size_t cap = std::min<size_t>(knob_blocks ? knob_blocks : kMaxOneShotBlocks, std::min(num_sms, kMaxBlocks));
    const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, cap)));
    launch_kernel(one_shot_kernel<T, decltype(op_tag)::value>, blocks, kThreads, tuning.dependent_launch, stream, p);
  });
}

}  // namespace

const AlgorithmEntry kOneShotEntry{
    "one_shot", AllReduceAlgorithm::kOneShot, /*internal=*/false, /*spans_nodes=*/false, {"oneshot", "one-shot"},
    &fits_one_node, &one_shot_capacity, &one_shot_scratch_bytes, &launch_one_shot, nullptr, nullptr};

}  // namespace ferry::allreduce
