// Pipelined one-shot AllReduce for two ranks inside a node: each rank pushes its
// whole input into the peer's scratch and reduces locally, like one-shot, but
// every block cuts its range into steps with one flag each, and half its warps
// only push while the other half reduce the steps that arrived. On two ranks
// one-shot and two-shot put the same bytes on the link (the whole buffer per
// direction); this one waits on one flag per step instead of two phases of
// flags, and needs no all-gather copy. It runs for one-shot calls above
// FERRY_ALLREDUCE_PIPELINED_MIN_BYTES when the node has exactly two ranks.
#include <algorithm>

#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/device/sync.cuh"

namespace ferry::allreduce {

namespace {

// Warps 0-15 push steps and signal each; warps 16-31 wait for each step and
// reduce it. 2 H200s, bf16, push + reduce threads 256+256 / 512+512 / 384+128 /
// 768+256: 4 MB 21.8 / 20.9 / 24.3 / 21.6 us, 16 MB 61.4 / 60.8 / 65.6 / 61.2.
// A separate signal warp, so the pushers never stall on the release (bar.arrive
// per step): 16 MB 72.8 us, slower (docs/results/allreduce_midsize_2xH100/).
constexpr int kPushThreads = 512;
constexpr int kReduceThreads = 512;
constexpr int kThreads = kPushThreads + kReduceThreads;
constexpr int kPushBarrier = 1, kReduceBarrier = 2;  // named barriers (0 is __syncthreads)
constexpr int kUnroll = 4;  // packs in flight per thread in a step's copy
constexpr size_t kMaxLaunchBytes = size_t{32} << 20;
constexpr size_t kSlotAlign = 256;
constexpr unsigned kStepBits = 20;

// NOTE [Pipelined one-shot]
// Rank p's packs of launch e land in parity (e & 1) of the peer's scratch, at
// their own pack index (one sender, so one slot). Block b of both ranks owns the
// same pack range and walks it in steps, with two warp groups that never wait
// for each other's progress on the peer:
// - the push group copies step s into the peer, meets at its named barrier, and
//   its thread 0 release-stores (e << 20 | s + 1) into the block's flag row at
//   the peer (the barrier orders the group's stores first, as __syncthreads
//   does for block_signal_row), then raises `pushed` in shared memory;
// - the reduce group's thread 0 waits until the peer's flag reaches step s and
//   `pushed` passed s (so in place, this rank's input of step s was read before
//   its output overwrites it), the group meets at its barrier and reduces step s.
// The push group never waits on the peer, so its stores stream at link speed
// while the reductions trail one flag behind. Flags only grow (steps < 2^20 per
// block), so one row per block serves every step of every launch. Reuse is NOTE
// [One-shot buffer reuse]'s argument: the peer reaches launch e+2, which writes
// parity (e & 1) again, only after its launch e+1 received this rank's data of
// e+1, which this rank pushed after its whole launch e (every block's reads of
// parity e & 1) finished. As a dependent launch (NOTE [AllReduce launches]) that
// still holds: start_launch() waits for launch e's grid before anything else.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) one_shot_pipelined_kernel(Params p) {
  start_launch();  // NOTE [AllReduce launches]
  __shared__ int failed;
  __shared__ unsigned pushed;  // steps the push group finished (atomics: a flag, not data)
  if (threadIdx.x == 0) {
    failed = 0;
    pushed = 0;
  }
  __syncthreads();
  const uint64_t epoch = read_epoch(p.epoch);
  const int me = p.rank(), peer = 1 - me;
  const size_t slot_bytes = round_up(p.capacity_bytes, kSlotAlign);
  const size_t parity_offset = (epoch & 1) * slot_bytes;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  size_t begin, end;
  split_range(num_packs, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const size_t step = p.chunk_packs;
  const size_t steps = (end - begin + step - 1) / step;
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  auto flag_of = [&](size_t s) { return (epoch << kStepBits) | (s + 1); };
  auto step_range = [&](size_t s, size_t* step_begin, size_t* step_end) {
    *step_begin = begin + s * step;
    *step_end = min(*step_begin + step, end);
  };

  if (threadIdx.x < kPushThreads) {
    const int t = threadIdx.x;
    char* remote = p.scratch.at(peer) + parity_offset;  // where this rank's packs land
    for (size_t s = 0; s < steps; ++s) {
      size_t b0, b1;
      step_range(s, &b0, &b1);
      for (size_t base = b0; base < b1; base += size_t{kPushThreads} * kUnroll) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t i = base + u * kPushThreads + t;
          if (i < b1) v[u] = load_user_pack(in, i, p.count, p.aligned);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t i = base + u * kPushThreads + t;
          if (i < b1) device::store16(remote + i * kPackBytes, v[u]);
        }
      }
      device::named_barrier(kPushBarrier, kPushThreads);
      if (t == 0) {
        p.flags.signal(peer, row + me, flag_of(s));
        atomicExch(&pushed, static_cast<unsigned>(s + 1));
      }
    }
  } else {
    const int t = threadIdx.x - kPushThreads;
    const char* local = p.scratch.at(me) + parity_offset;
    for (size_t s = 0; s < steps; ++s) {
      if (t == 0) {
        if (!p.flags.wait(row + peer, flag_of(s), p.wait, peer, kPhaseOneShotExchange)) failed = 1;
        // No timeout needed: the push group waits on nothing, so it gets there.
        while (atomicAdd(&pushed, 0u) <= s) {
        }
      }
      device::named_barrier(kReduceBarrier, kReduceThreads);
      if (*static_cast<volatile int*>(&failed) != 0) break;
      size_t b0, b1;
      step_range(s, &b0, &b1);
      for (size_t base = b0; base < b1; base += size_t{kReduceThreads} * kUnroll) {
        uint4 raw[kUnroll][kMaxNodeRanks];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t i = base + u * kReduceThreads + t;
          if (i < b1) {  // rank order with constant indices (registers, not local memory)
            const uint4 mine = load_user_pack(in, i, p.count, p.aligned);
            const uint4 theirs = device::load16(local + i * kPackBytes);
            raw[u][0] = me == 0 ? mine : theirs;
            raw[u][1] = me == 0 ? theirs : mine;
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t i = base + u * kReduceThreads + t;
          if (i < b1) store_user_pack(out, i, p.count, p.aligned, reduce_in_rank_order<T, Op>(raw[u], 2));
        }
      }
    }
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
    // Steps of 1024 packs (16 KB). 2 H100s, bf16, steps of 512 / 1024 / 2048 /
    // 4096 packs: 16 MB 72.6 / 62.0 / 70.2 / 77.3 us, 32 MB 133.7 / 111.6 /
    // 131.5 / 143.3, 4 MB 23.4 / 22.4 / 22.2 / 22.2. (A first version, where
    // the whole block pushed, signalled, waited and reduced each step in turn,
    // got slower with smaller steps: 38.4 us at 4 MB with 256-pack steps.)
    const size_t knob_step = tuning.one_shot_pipelined_step_packs;
    p.chunk_packs = knob_step ? knob_step : 1024;
    // Flags carry the step in their low kStepBits: fewer than 2^20 steps per block.
    const size_t packs = packs_of(p.count, sizeof(T)), per_block = (packs + blocks - 1) / blocks;
    const size_t max_steps = (size_t{1} << kStepBits) - 1;
    p.chunk_packs = std::max(p.chunk_packs, (per_block + max_steps - 1) / max_steps);
    launch_kernel(one_shot_pipelined_kernel<T, decltype(op_tag)::value>, blocks, kThreads, tuning.dependent_launch,
                  stream, p);
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
