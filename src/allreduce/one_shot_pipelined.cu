// Pipelined one-shot AllReduce for two ranks inside a node: each rank pushes its
// whole input into the peer's scratch and reduces locally, like one-shot, but
// every block cuts its range into steps with one flag each, so the local
// reduction of step s overlaps the NVLink stores of step s+1. On two ranks
// one-shot and two-shot put the same bytes on the link (the whole buffer per
// direction); this one waits on one flag per step instead of two phases of
// flags, and needs no all-gather copy. It runs for one-shot calls above
// FERRY_ALLREDUCE_PIPELINED_MIN_BYTES when the node has exactly two ranks.
#include <algorithm>

#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // packs in flight per thread in a step's copy
constexpr size_t kMaxLaunchBytes = size_t{32} << 20;
constexpr size_t kSlotAlign = 256;
constexpr unsigned kStepBits = 20;

// NOTE [Pipelined one-shot]
// Rank p's packs of launch e land in parity (e & 1) of the peer's scratch, at
// their own pack index (one sender, so one slot). Block b of both ranks owns the
// same pack range and walks it in steps; after pushing step s, a block stores
// (e << 20 | s + 1) into its flag row at the peer (release: the step's stores
// first), pushes step s+1, then waits until the peer's flag reaches step s and
// reduces that step. Flags only grow (steps < 2^20 per block), so one row per
// block serves every step of every launch. Reuse is NOTE [One-shot buffer
// reuse]'s argument: the peer reaches launch e+2, which writes parity (e & 1)
// again, only after its launch e+1 received this rank's data of e+1, which this
// rank pushed after its whole launch e (every block's reads of parity e & 1)
// finished. In place is safe: a step's output packs were pushed before they are
// written, and the peer reads only its scratch.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) one_shot_pipelined_kernel(Params p) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  const uint64_t epoch = read_epoch(p.epoch);
  const int me = p.rank(), peer = 1 - me;
  const size_t slot_bytes = round_up(p.capacity_bytes, kSlotAlign);
  const size_t parity_offset = (epoch & 1) * slot_bytes;
  char* remote = p.scratch[peer] + parity_offset;  // where this rank's packs land
  const char* local = p.scratch[me] + parity_offset;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  size_t begin, end;
  split_range(num_packs, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const size_t step = p.chunk_packs;
  const size_t steps = (end - begin + step - 1) / step;
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  auto flag_of = [&](size_t s) { return (epoch << kStepBits) | (s + 1); };

  // Calls fn(first pack, last pack + 1) for the kUnroll-pack groups of step s.
  auto for_step = [&](size_t s, auto fn) {
    const size_t step_begin = begin + s * step, step_end = min(step_begin + step, end);
    for (size_t base = step_begin; base < step_end; base += size_t{kThreads} * kUnroll) fn(base, step_end);
  };
  auto push = [&](size_t s) {
    for_step(s, [&](size_t base, size_t step_end) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * kThreads + threadIdx.x;
        if (i < step_end) v[u] = load_user_pack(in, i, p.count, p.aligned);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * kThreads + threadIdx.x;
        if (i < step_end) device::store16(remote + i * kPackBytes, v[u]);
      }
    });
  };
  auto reduce = [&](size_t s) {
    for_step(s, [&](size_t base, size_t step_end) {
      uint4 raw[kUnroll][kMaxNodeRanks];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * kThreads + threadIdx.x;
        if (i < step_end) {  // rank order with constant indices (registers, not local memory)
          const uint4 mine = load_user_pack(in, i, p.count, p.aligned);
          const uint4 theirs = device::load16(local + i * kPackBytes);
          raw[u][0] = me == 0 ? mine : theirs;
          raw[u][1] = me == 0 ? theirs : mine;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * kThreads + threadIdx.x;
        if (i < step_end) store_user_pack(out, i, p.count, p.aligned, reduce_in_rank_order<T, Op>(raw[u], 2));
      }
    });
  };

  if (steps > 0) push(0);
  for (size_t s = 0; s < steps; ++s) {
    __syncthreads();  // step s's stores, then its flag (NOTE [Pipelined one-shot])
    p.flags.block_signal_row(row, flag_of(s), /*include_self=*/false);
    if (s + 1 < steps) push(s + 1);
    if (!p.flags.block_wait_row(row, flag_of(s), p.wait, kPhaseOneShotExchange, /*include_self=*/false, &failed))
      break;
    reduce(s);
  }
  finish_epoch(p.epoch);
}

size_t one_shot_pipelined_capacity(size_t max_bytes) {
  return round_up(std::min(max_bytes, kMaxLaunchBytes), kPackBytes);
}

// Two parities of one slot; nothing where it never runs (world size not 2).
size_t one_shot_pipelined_scratch_bytes(size_t capacity, int world_size) {
  return world_size == 2 ? 2 * round_up(capacity, kSlotAlign) : 0;
}

void launch_one_shot_pipelined(const Params& params, const LaunchTuning& tuning, DataType type, ReduceOp op,
                               int num_sms, cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    Params p = params;
    const int blocks = std::max(1, std::min(num_sms, kMaxBlocks));
    // About 4 steps per block, 256..2048 packs (4..32 KB) each: enough steps to
    // overlap the reduction with the stores, few enough flags.
    // Steps of 2048 packs (32 KB). Smaller steps were slower, not faster: on 2
    // H100s, steps of 256 / 512 / 1024 / 2048 / 4096 packs took 38.4 / 27.6 /
    // 24.0 / 21.8 / 21.8 us at 4 MB and 139 / 87 / 67 / 68 / 80 us at 16 MB
    // (bf16): each step's flag costs more than its overlap saves, so auto sends
    // only calls up to 4 MB here, where a block's range is one or two steps.
    const size_t knob_step = tuning.one_shot_pipelined_step_packs;
    p.chunk_packs = knob_step ? knob_step : 2048;
    one_shot_pipelined_kernel<T, decltype(op_tag)::value><<<blocks, kThreads, 0, stream>>>(p);
    FERRY_CUDA_CHECK_LAUNCH();
  });
}

std::string exactly_two_ranks(const CommShape& comm) {
  std::string why = fits_one_node(comm);
  if (why.empty() && comm.world_size != 2) why = "the pipelined one-shot runs on two ranks only";
  return why;
}

}  // namespace

const AlgorithmEntry kOneShotPipelinedEntry{
    "one_shot_pipelined", AllReduceAlgorithm::kOneShot, /*internal=*/true, /*spans_nodes=*/false, {nullptr, nullptr},
    &exactly_two_ranks, &one_shot_pipelined_capacity, &one_shot_pipelined_scratch_bytes, &launch_one_shot_pipelined,
    nullptr, nullptr};

}  // namespace ferry::allreduce
