// Two-shot AllReduce: reduce-scatter by push, all-gather by pull.
//
// The packs are cut into n shards, shard q owned by rank q. Each block walks
// chunks of the shards; for every chunk it pushes the slice of shard q to rank
// q's scratch (slot = sender), raises a flag, waits for the peers' flags, reduces
// its own shard's slice in rank order into a "reduced" area and the output,
// raises a second flag, waits for the peers', and pulls their reduced slices
// into the output. Every link carries 2(n-1)/n of the data: the bandwidth path.
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kMaxThreads = 512;
constexpr size_t kSlotAlign = 256;
constexpr unsigned kIterationBits = 20;

struct ShardLayout {
  size_t shard_packs;     // packs per shard (last shards may hold fewer)
  size_t slot_bytes;      // one sender's slot in the scratch
  size_t reduced_offset;  // where the reduced shard lives (all-gather by pull)
  size_t gather_offset;   // one slot per sender of reduced shards (all-gather by push)
};

__host__ __device__ inline ShardLayout shard_layout(size_t count_packs, size_t capacity_bytes, int world) {
  ShardLayout l;
  l.shard_packs = (count_packs + world - 1) / world;
  const size_t capacity_shard_packs = (capacity_bytes / kPackBytes + world - 1) / world;
  l.slot_bytes = round_up(capacity_shard_packs * kPackBytes, kSlotAlign);
  l.reduced_offset = l.slot_bytes * world;
  l.gather_offset = l.reduced_offset + l.slot_bytes;
  return l;
}

// NOTE [Two-shot buffer reuse]
// (All-gather by push: p writes its reduced slice of e+1 into q's gather slot
// only after q's reduce-scatter data of e+1 arrived, sent after q finished e.)
// No double buffering is needed: rank p pushes launch e+1 into q's slot only after
// finishing launch e, which includes pulling q's reduced slice of e, which q wrote
// after it had read every slot of that chunk. Likewise p overwrites its reduced
// slice of e+1 only after q's reduce-scatter data of e+1 arrived, which q sent
// after it finished pulling in launch e. Flags are (epoch << 20 | step + 1), so
// they grow across steps and launches.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kMaxThreads) two_shot_kernel(Params p) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  const uint64_t epoch = read_epoch(p.epoch);
  const int world = p.world_size(), me = p.rank();
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const ShardLayout layout = shard_layout(num_packs, p.capacity_bytes, world);
  const size_t chunk = p.chunk_packs;
  const size_t num_chunks = (layout.shard_packs + chunk - 1) / chunk;
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  char* local = p.scratch.at(me);
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  auto shard_len = [&](int q) { return shard_length(q, layout.shard_packs, num_packs); };

  const size_t my_len = shard_len(me);
  const bool push_gather = p.variant != 0;
  // This block handles chunks blockIdx.x, blockIdx.x + gridDim.x, ...: `steps` of them.
  const size_t steps = blockIdx.x < num_chunks ? (num_chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto flag_of = [&](size_t step) { return (epoch << kIterationBits) | (step + 1); };
  auto chunk_range = [&](size_t step, size_t* begin, size_t* end) {
    const size_t c = blockIdx.x + step * gridDim.x;
    *begin = c * chunk;
    *end = min(*begin + chunk, layout.shard_packs);
  };

  // Pack j of every peer's shard that has one: all loads in flight, then the stores.
  auto move_peer_packs = [&](size_t j, auto load, auto store) {
    uint4 v[kMaxNodeRanks];
#pragma unroll
    for (int q = 0; q < kMaxNodeRanks; ++q)
      if (q < world && q != me && j < shard_len(q)) v[q] = load(q);
#pragma unroll
    for (int q = 0; q < kMaxNodeRanks; ++q)
      if (q < world && q != me && j < shard_len(q)) store(q, v[q]);
  };

  // 1. Reduce-scatter: push the slice of every peer's shard into its scratch.
  auto push_scatter = [&](size_t step) {
    size_t chunk_begin, chunk_end;
    chunk_range(step, &chunk_begin, &chunk_end);
    for (size_t j = chunk_begin + threadIdx.x; j < chunk_end; j += blockDim.x)
      move_peer_packs(
          j, [&](int q) { return load_user_pack(in, q * layout.shard_packs + j, p.count, p.aligned); },
          [&](int q, const uint4& v) { device::store16(p.scratch.at(q) + me * layout.slot_bytes + j * kPackBytes, v); });
    __syncthreads();
    p.flags.block_signal_row(row, flag_of(step), /*include_self=*/false);
  };

  // 2. Reduce this rank's shard slice in rank order; push it to the peers (or
  // keep it for them to pull).
  auto reduce = [&](size_t step) -> bool {
    if (!p.flags.block_wait_row(row, flag_of(step), p.wait, kPhaseTwoShotReduceScatter, /*include_self=*/false,
                                &failed))
      return false;
    size_t chunk_begin, chunk_end;
    chunk_range(step, &chunk_begin, &chunk_end);
    for (size_t j = chunk_begin + threadIdx.x; j < chunk_end && j < my_len; j += blockDim.x) {
      const size_t pack = me * layout.shard_packs + j;
      uint4 raw[kMaxNodeRanks];
#pragma unroll
      for (int r = 0; r < kMaxNodeRanks; ++r)
        if (r < world)
          raw[r] = (r == me) ? load_user_pack(in, pack, p.count, p.aligned)
                             : device::load16(local + r * layout.slot_bytes + j * kPackBytes);
      const uint4 result = reduce_in_rank_order<T, Op>(raw, world);
      if (push_gather) {
#pragma unroll
        for (int q = 0; q < kMaxNodeRanks; ++q)
          if (q < world && q != me)
            device::store16(p.scratch.at(q) + layout.gather_offset + me * layout.slot_bytes + j * kPackBytes, result);
      } else {
        device::store16(local + layout.reduced_offset + j * kPackBytes, result);
      }
      store_user_pack(out, pack, p.count, p.aligned, result);
    }
    __syncthreads();
    p.flags.block_signal_row(row + kMaxNodeRanks, flag_of(step), /*include_self=*/false);
    return true;
  };

  // 3. All-gather: copy the slices the peers pushed here (or pull them) into
  // the output.
  auto gather = [&](size_t step) -> bool {
    if (!p.flags.block_wait_row(row + kMaxNodeRanks, flag_of(step), p.wait, kPhaseTwoShotAllGather,
                                /*include_self=*/false, &failed))
      return false;
    size_t chunk_begin, chunk_end;
    chunk_range(step, &chunk_begin, &chunk_end);
    for (size_t j = chunk_begin + threadIdx.x; j < chunk_end; j += blockDim.x)
      move_peer_packs(
          j,
          [&](int q) {
            return push_gather ? device::load16(local + layout.gather_offset + q * layout.slot_bytes + j * kPackBytes)
                               : device::load16(p.scratch.at(q) + layout.reduced_offset + j * kPackBytes);
          },
          [&](int q, const uint4& v) { store_user_pack(out, q * layout.shard_packs + j, p.count, p.aligned, v); });
    return true;
  };

  for (size_t k = 0; k < steps; ++k) {
    push_scatter(k);
    if (!reduce(k) || !gather(k)) break;
  }
  finish_epoch(p.epoch);
}

size_t two_shot_capacity(size_t max_bytes) { return round_up(max_bytes, kPackBytes); }

size_t two_shot_scratch_bytes(size_t capacity, int world_size) {
  const ShardLayout l = shard_layout(0, capacity, world_size);
  return l.gather_offset + l.slot_bytes * world_size;
}

void launch_two_shot(const Params& params, const LaunchTuning& tuning, DataType type, ReduceOp op, int num_sms,
                     cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    Params p = params;
    const size_t packs = packs_of(p.count, sizeof(T));
    const size_t shard = (packs + p.world_size() - 1) / p.world_size();
    const size_t knob_blocks = tuning.two_shot_blocks;
    const size_t knob_chunk = tuning.two_shot_max_chunk_packs;
    const int max_blocks = std::min(knob_blocks ? static_cast<int>(knob_blocks) : num_sms, kMaxBlocks);
    // Spread a shard over every SM, 64..2048 packs per block step, up to 8192
    // for shards of 2M+ packs (4xH200: 64 MB 307 us with 2048 vs 324 with 8192;
    // 256 MB 1184 us with 8192 vs 1193 with 2048).
    // Two ranks: 8192 at every size, so a block takes one step where it can
    // (2xH100, bf16: 16 MB 65.4 us vs 71.0 with 2048, 32 MB 118.3 vs 133.1;
    // 64-256 MB, where the rule above already gave 8192, unchanged).
    const size_t max_chunk = knob_chunk                                          ? knob_chunk
                             : p.world_size() == 2 || shard >= (size_t{2} << 20) ? 8192
                                                                                  : 2048;
    size_t chunk = (shard + max_blocks - 1) / max_blocks;
    chunk = std::min<size_t>(std::max<size_t>(round_up(chunk, 32), 64), max_chunk);
    p.chunk_packs = chunk;
    // All-gather by push measured faster than by pull at every size on 4xH200
    // (16 MB: 91.6 vs 100.3 us; 256 MB: 1188 vs 1265 us). A pipelined variant
    // (scatter of step k+1 in flight while waiting on step k) measured no gain
    // and was dropped. FERRY_TWO_SHOT_VARIANT: 1 (pull) sets 0, else 1 (push).
    p.variant = tuning.two_shot_variant;
    const size_t chunks = (shard + chunk - 1) / chunk;
    const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(chunks, max_blocks)));
    const int threads = static_cast<int>(std::min<size_t>(kMaxThreads, chunk));
    launch_kernel(two_shot_kernel<T, decltype(op_tag)::value>, blocks, threads, /*dependent=*/false, stream, p);
  });
}

}  // namespace

const AlgorithmEntry kTwoShotEntry{
    "two_shot", AllReduceAlgorithm::kTwoShot, /*internal=*/false, /*spans_nodes=*/false, {"twoshot", "two-shot"},
    &fits_one_node, &two_shot_capacity, &two_shot_scratch_bytes, &launch_two_shot, nullptr, nullptr};

}  // namespace ferry::allreduce
