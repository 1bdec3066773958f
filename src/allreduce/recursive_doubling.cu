// Recursive-doubling AllReduce (power-of-two world sizes): log2(n) steps; at step
// i every rank exchanges its whole partial with partner rank ^ 2^i and combines
// the two, lower rank's operand first, so both partners hold identical bits.
// Partials travel in the accumulation type. Fewest dependent hops for mid sizes
// on small groups; moves log2(n) x the data per link.
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 512;
constexpr size_t kMaxLaunchBytes = size_t{4} << 20;
constexpr size_t kSlotAlign = 256;
constexpr size_t kAccPackBytes = 32;
constexpr int kMaxSteps = 3;  // log2(kMaxNodeRanks)

struct DoublingLayout {
  size_t slot_bytes;    // one step's partial
  size_t work_offset;   // this rank's running partial
};

__host__ __device__ inline DoublingLayout doubling_layout(size_t capacity_bytes) {
  DoublingLayout l;
  l.slot_bytes = round_up(capacity_bytes / kPackBytes * kAccPackBytes, kSlotAlign);
  l.work_offset = 2 * kMaxSteps * l.slot_bytes;
  return l;
}

// NOTE [Recursive-doubling buffer reuse]
// A rank finishing launch e proves nothing about its step-0 partner's progress
// beyond step 0 (later steps carry the partner's data only through others), so
// the partner may still be reading slot 0 when this rank starts e+1. Slots are
// therefore double-buffered by epoch parity: launch e+2 can only start after the
// partner's step-0 data of e+1 arrived, sent after the partner finished e.
template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) recursive_doubling_kernel(Params p) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const uint64_t epoch = read_epoch(p.epoch);
  const int world = p.world_size(), me = p.rank();
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const DoublingLayout layout = doubling_layout(p.capacity_bytes);
  size_t begin, end;
  split_range(num_packs, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  char* local = p.scratch.at(me);
  char* work = local + layout.work_offset;
  const size_t parity_offset = (epoch & 1) * kMaxSteps * layout.slot_bytes;
  const size_t row = static_cast<size_t>(blockIdx.x) * kFlagRow;
  int steps = 0;
  while ((1 << steps) < world) ++steps;

  bool ok = true;
  for (int i = 0; i < steps && ok; ++i) {
    const int partner = me ^ (1 << i);
    const size_t slot = parity_offset + i * layout.slot_bytes;
    for (size_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
      const AccPack<T> mine = i == 0 ? unpack<T>(load_user_pack(in, j, p.count, p.aligned))
                                     : load_acc<T>(work + j * kAccPackBytes);
      store_acc<T>(p.scratch.at(partner) + slot + j * kAccPackBytes, mine);
    }
    __syncthreads();
    if (threadIdx.x == 0) p.flags.signal(partner, row + i, epoch);
    ok = p.flags.block_wait_one(row + i, epoch, p.wait, partner, kPhaseRecursiveDoubling, &failed);
    if (!ok) break;
    for (size_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
      const AccPack<T> mine = i == 0 ? unpack<T>(load_user_pack(in, j, p.count, p.aligned))
                                     : load_acc<T>(work + j * kAccPackBytes);
      const AccPack<T> theirs = load_acc<T>(local + slot + j * kAccPackBytes);
      AccPack<T> acc = me < partner ? mine : theirs;
      accumulate<T, Op>(acc, me < partner ? theirs : mine);
      if (i == steps - 1)
        store_user_pack(out, j, p.count, p.aligned, pack_final<T, Op>(acc, world));
      else
        store_acc<T>(work + j * kAccPackBytes, acc);
    }
  }
  finish_epoch(p.epoch);
}

size_t recursive_doubling_capacity(size_t max_bytes) {
  return round_up(std::min(max_bytes, kMaxLaunchBytes), kPackBytes);
}

size_t recursive_doubling_scratch_bytes(size_t capacity, int /*world_size*/) {
  const DoublingLayout l = doubling_layout(capacity);
  return l.work_offset + l.slot_bytes;
}

void launch_recursive_doubling(const Params& p, const LaunchTuning& /*tuning*/, DataType type, ReduceOp op,
                               int num_sms, cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    const size_t packs = packs_of(p.count, sizeof(T));
    const size_t want = (packs + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, std::min(num_sms, kMaxBlocks))));
    launch_kernel(recursive_doubling_kernel<T, decltype(op_tag)::value>, blocks, kThreads, /*dependent=*/false,
                  stream, p);
  });
}

// Partners are rank ^ 2^i: the group must be a power of two.
std::string power_of_two(const CommShape& comm) {
  std::string why = fits_one_node(comm);
  if (why.empty() && (comm.world_size & (comm.world_size - 1)) != 0)
    why = "AllReduce algorithm recursive_doubling needs a power-of-two world size, got " +
          std::to_string(comm.world_size);
  return why;
}

}  // namespace

const AlgorithmEntry kRecursiveDoublingEntry{
    "recursive_doubling", AllReduceAlgorithm::kRecursiveDoubling, /*internal=*/false, /*spans_nodes=*/false,
    {"rd", "recursive-doubling"}, &power_of_two, &recursive_doubling_capacity, &recursive_doubling_scratch_bytes,
    &launch_recursive_doubling, nullptr, nullptr};

}  // namespace ferry::allreduce
