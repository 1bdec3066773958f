// One-shot AllReduce with the low-latency (LL) protocol, for the smallest
// buffers: like one-shot, every rank pushes its input to every peer and reduces
// locally, but each 16-byte line carries 8 bytes of data and two copies of a
// 4-byte tag, so the receiver polls the data itself. No memory fence and no
// separate flag: one NVLink trip instead of data, fence, then flag. The price is
// twice the bytes on the wire, so it only pays for small buffers.
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxLaunchBytes = size_t{256} << 10;
constexpr size_t kLineBytes = 16;     // {data0, tag, data1, tag}
constexpr size_t kLinesPerPack = 2;   // a 16-byte pack travels as two lines
constexpr size_t kSlotAlign = 256;
constexpr int kMaxLlBlocks = 64;

// NOTE [LL lines]
// A line is stored with one 16-byte volatile store; NVLink and the memory system
// deliver each aligned 8-byte half atomically, so a half whose tag matches holds
// the data written with that tag. The tag is the low 32 bits of the launch's
// epoch, never 0 (the counter skips such epochs: NOTE [Epoch tags], NOTE
// [AllReduce epoch]; the scratch starts zeroed), so lines left from older
// launches never match. Buffer reuse follows NOTE [One-shot buffer reuse]: slots are
// double-buffered by epoch parity, and a rank reaches launch e+2 only after it
// received every peer's data of e+1, which each peer sent after finishing e.
__device__ __forceinline__ uint4 make_line(uint32_t a, uint32_t b, uint32_t tag) { return make_uint4(a, tag, b, tag); }

template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) one_shot_ll_kernel(Params p) {
  start_launch();  // NOTE [AllReduce launches]
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // The first pack's load is in flight while the epoch is read (small calls:
  // most threads have one pack, and both loads sit on the critical path).
  const uint4 first_pack = first < num_packs ? load_user_pack(in, first, p.count, p.aligned) : uint4{};
  const uint64_t epoch = read_epoch(p.epoch);
  const uint32_t tag = static_cast<uint32_t>(epoch);  // never 0: NOTE [Epoch tags]
  const int world = p.world_size(), me = p.rank();
  const size_t slot_bytes = round_up(p.capacity_bytes / kPackBytes * kLinesPerPack * kLineBytes, kSlotAlign);
  const size_t parity_offset = (epoch & 1) * world * slot_bytes;

  // 1. Push: two tagged lines per pack into this rank's slot of every peer.
  const size_t my_slot = parity_offset + me * slot_bytes;
  for (size_t i = first; i < num_packs; i += stride) {
    const uint4 v = i == first ? first_pack : load_user_pack(in, i, p.count, p.aligned);
    const uint4 line0 = make_line(v.x, v.y, tag), line1 = make_line(v.z, v.w, tag);
#pragma unroll
    for (int q = 0; q < kMaxNodeRanks; ++q) {
      if (q < world && q != me) {
        char* dst = p.scratch.at(q) + my_slot + i * kLinesPerPack * kLineBytes;
        device::store16_volatile(dst, line0);
        device::store16_volatile(dst + kLineBytes, line1);
      }
    }
  }

  // 2. Poll every peer's lines (own memory), reduce in rank order.
  const char* local = p.scratch.at(me) + parity_offset;
  bool ok = true;
  for (size_t i = first; i < num_packs && ok; i += stride) {
    uint4 raw[kMaxNodeRanks];
#pragma unroll
    for (int r = 0; r < kMaxNodeRanks; ++r) {
      if (r >= world || !ok) continue;
      if (r == me) {
        raw[r] = i == first ? first_pack : load_user_pack(in, i, p.count, p.aligned);
        continue;
      }
      const char* src = local + r * slot_bytes + i * kLinesPerPack * kLineBytes;
      uint4 line0, line1;
      ok = device::spin_wait(
          [&](uint64_t& seen) {
            line0 = device::load16_volatile(src);
            line1 = device::load16_volatile(src + kLineBytes);
            seen = line0.y;
            return line0.y == tag && line0.w == tag && line1.y == tag && line1.w == tag;
          },
          p.wait, r, kPhaseOneShotExchange, tag);
      raw[r] = make_uint4(line0.x, line0.z, line1.x, line1.z);
    }
    if (!ok) break;
    store_user_pack(out, i, p.count, p.aligned, reduce_in_rank_order<T, Op>(raw, world));
  }
  finish_epoch(p.epoch);
}

size_t one_shot_ll_capacity(size_t max_bytes) { return round_up(std::min(max_bytes, kMaxLaunchBytes), kPackBytes); }

size_t one_shot_ll_scratch_bytes(size_t capacity, int world_size) {
  return 2 * static_cast<size_t>(world_size) * round_up(capacity / kPackBytes * kLinesPerPack * kLineBytes, kSlotAlign);
}

void launch_one_shot_ll(const Params& p, const LaunchTuning& tuning, DataType type, ReduceOp op, int num_sms,
                        cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    const size_t packs = packs_of(p.count, sizeof(T));
    const size_t threads = tuning.one_shot_ll_threads ? tuning.one_shot_ll_threads : kThreads;
    const size_t want = (packs + threads - 1) / threads;
    const size_t max_blocks = tuning.one_shot_ll_blocks ? tuning.one_shot_ll_blocks : kMaxLlBlocks;
    const size_t cap = std::min<size_t>(max_blocks, std::min(num_sms, kMaxBlocks));
    const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>(want, cap)));
    launch_kernel(one_shot_ll_kernel<T, decltype(op_tag)::value>, blocks, static_cast<int>(threads),
                  tuning.dependent_launch, stream, p);
  });
}

}  // namespace

// Internal: never named by users; AllReduce::run picks it for one-shot calls up
// to FERRY_ALLREDUCE_LL_MAX_BYTES.
const AlgorithmEntry kOneShotLlEntry{
    "one_shot_ll", AllReduceAlgorithm::kOneShot, /*internal=*/true, /*spans_nodes=*/false, {nullptr, nullptr},
    &fits_one_node, &one_shot_ll_capacity, &one_shot_ll_scratch_bytes, &launch_one_shot_ll, nullptr, nullptr};

}  // namespace ferry::allreduce
