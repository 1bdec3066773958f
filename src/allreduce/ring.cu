// Ring AllReduce: n-1 reduce-scatter steps then n-1 all-gather steps, each rank
// pushing to its successor only. Every link carries 2(n-1)/n of the data, as in
// two-shot, but with 2(n-1) dependent hops; kept for topologies where only
// neighbours are well connected and as a reference. Partial sums travel in the
// accumulation type (fp32 for 16-bit inputs), so rounding happens once.
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 512;
constexpr size_t kMaxLaunchBytes = size_t{16} << 20;
constexpr size_t kSlotAlign = 256;
constexpr size_t kAccPackBytes = 32;  // widest AccPack (8 fp32 for a 16-bit pack)

struct RingLayout {
  size_t shard_packs;
  size_t rs_slot_bytes;  // one reduce-scatter step's partials (accumulation type)
  size_t ag_slot_bytes;  // one all-gather step's final values
  size_t ag_offset;
};

__host__ __device__ inline RingLayout ring_layout(size_t count_packs, size_t capacity_bytes, int world) {
  RingLayout l;
  l.shard_packs = (count_packs + world - 1) / world;
  const size_t cap_shard = (capacity_bytes / kPackBytes + world - 1) / world;
  l.rs_slot_bytes = round_up(cap_shard * kAccPackBytes, kSlotAlign);
  l.ag_slot_bytes = round_up(cap_shard * kPackBytes, kSlotAlign);
  l.ag_offset = l.rs_slot_bytes * (world - 1);
  return l;
}

// NOTE [Ring buffer reuse]
// Each step has its own slot, so nothing is reused inside a launch. Across
// launches: p writes q's slots of launch e+1 only after finishing launch e, which
// needed every rank's final shard of e; a rank publishes its final shard only
// after reading all its reduce-scatter slots, and the reduce-scatter of e+1
// reaching p's final shard means every rank has started e+1, hence finished
// reading its all-gather slots of e. Flag slot s (reduce-scatter) and
// kMaxNodeRanks + t (all-gather) of the receiver's row carry the epoch.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) ring_kernel(Params p) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const uint64_t epoch = read_epoch(p.epoch);
  const int world = p.world_size(), me = p.rank();
  const int succ = (me + 1) % world, pred = (me + world - 1) % world;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const RingLayout layout = ring_layout(num_packs, p.capacity_bytes, world);
  size_t begin, end;
  split_range(layout.shard_packs, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  char* local = p.scratch.at(me);
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  auto shard_len = [&](int q) { return shard_length(q, layout.shard_packs, num_packs); };

  auto signal_successor = [&](int slot) {
    __syncthreads();
    if (threadIdx.x == 0) p.flags.signal(succ, row + slot, epoch);
  };
  bool ok = true;

  // Reduce-scatter: at step s this rank adds its part of shard (me-1-s) to the
  // partial received from the predecessor and passes it on; after n-1 steps the
  // predecessor's partial of shard `me` is complete but for this rank's part.
  for (int s = 0; s < world && ok; ++s) {
    const int shard = ((me - 1 - s) % world + world) % world;
    if (s > 0) ok = p.flags.block_wait_one(row + (s - 1), epoch, p.wait, pred, kPhaseRingReduceScatter, &failed);
    if (!ok) break;
    const char* received = local + (s - 1) * layout.rs_slot_bytes;
    const size_t len = shard_len(shard);
    for (size_t j = begin + threadIdx.x; j < end && j < len; j += blockDim.x) {
      AccPack<T> own = unpack<T>(load_user_pack(in, shard * layout.shard_packs + j, p.count, p.aligned));
      AccPack<T> acc = own;
      if (s > 0) {
        acc = load_acc<T>(received + j * kAccPackBytes);
        accumulate<T, Op>(acc, own);
      }
      if (s < world - 1) {
        store_acc<T>(p.scratch.at(succ) + s * layout.rs_slot_bytes + j * kAccPackBytes, acc);
      } else {  // shard == me: final value, the start of the all-gather
        const uint4 result = pack_final<T, Op>(acc, world);
        store_user_pack(out, shard * layout.shard_packs + j, p.count, p.aligned, result);
        device::store16(p.scratch.at(succ) + layout.ag_offset + j * kPackBytes, result);
      }
    }
    signal_successor(s < world - 1 ? s : kMaxNodeRanks);
  }

  // All-gather: slot t holds shard (me-1-t); write it out and forward it.
  for (int t = 0; t < world - 1 && ok; ++t) {
    ok = p.flags.block_wait_one(row + kMaxNodeRanks + t, epoch, p.wait, pred, kPhaseRingAllGather, &failed);
    if (!ok) break;
    const int shard = ((me - 1 - t) % world + world) % world;
    const char* received = local + layout.ag_offset + t * layout.ag_slot_bytes;
    const size_t len = shard_len(shard);
    for (size_t j = begin + threadIdx.x; j < end && j < len; j += blockDim.x) {
      const uint4 v = device::load16(received + j * kPackBytes);
      store_user_pack(out, shard * layout.shard_packs + j, p.count, p.aligned, v);
      if (t + 1 < world - 1)
        device::store16(p.scratch.at(succ) + layout.ag_offset + (t + 1) * layout.ag_slot_bytes + j * kPackBytes, v);
    }
    if (t + 1 < world - 1) signal_successor(kMaxNodeRanks + t + 1);
  }
  finish_epoch(p.epoch);
}

size_t ring_capacity(size_t max_bytes) { return round_up(std::min(max_bytes, kMaxLaunchBytes), kPackBytes); }

size_t ring_scratch_bytes(size_t capacity, int world_size) {
  const RingLayout l = ring_layout(0, capacity, world_size);
  return l.ag_offset + l.ag_slot_bytes * (world_size - 1);
}

void launch_ring(const Params& p, const LaunchTuning& /*tuning*/, DataType type, ReduceOp op, int num_sms,
                 cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    const size_t shard = (packs_of(p.count, sizeof(T)) + p.world_size() - 1) / p.world_size();
    const size_t want = (shard + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, std::min(num_sms, kMaxBlocks))));
    launch_kernel(ring_kernel<T, decltype(op_tag)::value>, blocks, kThreads, /*dependent=*/false, stream, p);
  });
}

}  // namespace

const AlgorithmEntry kRingEntry{
    "ring", AllReduceAlgorithm::kRing, /*internal=*/false, /*spans_nodes=*/false, {nullptr, nullptr},
    &fits_one_node, &ring_capacity, &ring_scratch_bytes, &launch_ring, nullptr, nullptr};

}  // namespace ferry::allreduce
