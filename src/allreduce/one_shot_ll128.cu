// One-shot AllReduce for two ranks inside a node with 128-byte flagged lines
// (LL128): like the pipelined one-shot (one_shot_pipelined.cu), every rank pushes
// its whole input into the peer's scratch while other warps of the same block
// reduce what arrived, but the data carries its own flag, so nothing waits for a
// fence or a separate flag word: a line is ready when its flag reads this launch's
// epoch. 8 of every 128 bytes are flag (1.07x the bytes of the pipelined one-shot).
// Two ranks' one-shot calls above the LL protocol's range and up to
// FERRY_ALLREDUCE_LL128_MAX_BYTES (6 MiB) take it (allreduce.cpp: measured there).
#include <algorithm>

#include "allreduce/allreduce_device.cuh"
#include "allreduce/ll128_unit.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::allreduce {

namespace {

constexpr int kWarpPairs = 16;                   // warps 0-15 push, warps 16-31 reduce; pair k = warps k, k + 16
constexpr int kThreads = 2 * kWarpPairs * 32;
constexpr size_t kUnitPacks = kLl128UnitPacks;  // a warp's unit: 30 packs of 16 bytes in 4 lines of 128 bytes
constexpr size_t kUnitBytes = kLl128UnitBytes;
constexpr int kPushUnroll = 2;  // units in flight per push warp (2xH200, session 40 c7: 4 took 1.017x at 4 MiB)
constexpr size_t kMaxLaunchBytes = size_t{32} << 20;

// NOTE [LL128 lines]
// A warp moves one unit with one 16-byte store per lane: lanes 8q..8q+7 write line q
// of the unit (128 aligned bytes). Lanes 8q..8q+6 carry whole packs; lane 8q+7
// carries half of a pack and, in its upper 8 bytes, the launch's epoch (the flag).
// Within each 16-lane half, lanes 0-6 and 8-14 hold packs 0-13 of the half's 15 and
// lanes 7 and 15 the low and high halves of pack 14. The receiving warp loads the
// unit the same way, one 16-byte volatile load per lane, and takes a line as
// arrived when its flag lane reads the epoch in that same load. This relies on
// NVLink delivering the 128 bytes that one warp store writes to an aligned line as
// one unit, as NCCL's LL128 protocol does on NVLink; the 8-byte LL protocol
// (one_shot_ll.cu) relies only on 8-byte atomicity. The flag is the 64-bit epoch
// (never 0; the scratch starts zeroed), so lines of older launches never match.
// Reuse is NOTE [Pipelined one-shot]'s argument: a launch's lines land in parity
// (e & 1) of the peer's scratch, and the peer reaches launch e + 2 only after its
// launch e + 1 received every line of this rank's e + 1, pushed after this rank's
// launch e finished reading parity (e & 1).
// In place: reduce warp k writes only the units push warp k already pushed (a
// shared counter per pair), so each input pack is read before its output is
// written.

template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) one_shot_ll128_kernel(Params p) {
  start_launch();  // NOTE [AllReduce launches]
  __shared__ int failed;
  __shared__ unsigned pushed[kWarpPairs];  // units each push warp stored (atomics: a flag its reduce partner reads)
  if (threadIdx.x == 0) failed = 0;
  if (threadIdx.x < kWarpPairs) pushed[threadIdx.x] = 0;
  __syncthreads();
  const uint64_t epoch = read_epoch(p.epoch);
  const uint32_t tag_lo = static_cast<uint32_t>(epoch), tag_hi = static_cast<uint32_t>(epoch >> 32);
  const int me = p.rank(), peer = 1 - me;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const size_t num_units = (num_packs + kUnitPacks - 1) / kUnitPacks;
  const size_t slot_bytes = ll128_slot_bytes(p.capacity_bytes);
  const size_t parity_offset = (epoch & 1) * slot_bytes;
  size_t begin, end;
  split_range(num_units, gridDim.x, blockIdx.x, &begin, &end);
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, pair = warp % kWarpPairs;
  const size_t my_pack = ll128_lane_pack(lane);
  const bool flag_lane = (lane & 7) == 7, high_half = (lane & 15) == 15;
  unsigned* pair_pushed = &pushed[pair];

  if (warp < kWarpPairs) {  // push: this pair's units, kPushUnroll at a time
    char* remote = p.scratch.at(peer) + parity_offset;
    unsigned done = 0;
    for (size_t u0 = begin + pair; u0 < end; u0 += size_t{kWarpPairs} * kPushUnroll) {
      uint4 v[kPushUnroll];
#pragma unroll
      for (int k = 0; k < kPushUnroll; ++k) {
        const size_t unit = u0 + size_t(k) * kWarpPairs, pack = unit * kUnitPacks + my_pack;
        v[k] = unit < end && pack < num_packs ? load_user_pack(in, pack, p.count, p.aligned) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < kPushUnroll; ++k) {
        const size_t unit = u0 + size_t(k) * kWarpPairs;
        if (unit >= end) break;  // warp-uniform
        const uint4 line = ll128_line(v[k], flag_lane, high_half, tag_lo, tag_hi);
        device::store16_volatile(remote + unit * kUnitBytes + size_t(lane) * 16, line);  // NOTE [LL128 lines]
        ++done;
      }
      __syncwarp();
      if (lane == 0) atomicExch(pair_pushed, done);  // the stores above consumed the loads: the packs were read
    }
  } else {  // reduce: the same units, as their lines arrive
    const char* local = p.scratch.at(me) + parity_offset;
    unsigned seq = 0;
    for (size_t unit = begin + pair; unit < end; unit += kWarpPairs, ++seq) {
      const size_t pack = unit * kUnitPacks + my_pack;
      const bool has_pack = pack < num_packs && !high_half;  // lane 15 of a half only lends its half of pack 14
      const uint4 mine = has_pack ? load_user_pack(in, pack, p.count, p.aligned) : make_uint4(0, 0, 0, 0);
      const char* src = local + unit * kUnitBytes + size_t(lane) * 16;
      uint4 line;
      if (!ll128_wait_unit(src, lane, flag_lane, tag_lo, tag_hi, p.wait, peer, epoch, &line)) {
        if (lane == 0) failed = 1;
        break;
      }
      ll128_store_reduced<T, Op>(p, out, pack, has_pack, lane, pair_pushed, seq, mine,
                                 ll128_peer_pack(line, flag_lane));
    }
  }
  finish_epoch(p.epoch);
}

// The largest call it takes: FERRY_ALLREDUCE_LL128_MAX_BYTES (read as the AllReduce is built), at most max_bytes
// and one launch's bytes; 0 where the knob is 0.
size_t one_shot_ll128_capacity(size_t max_bytes) {
  return round_up(std::min({max_bytes, ll128_max_bytes(), kMaxLaunchBytes}), kPackBytes);
}

// Two parities of one slot, on two ranks; nothing elsewhere or with no capacity.
size_t one_shot_ll128_scratch_bytes(size_t capacity, int world_size) {
  if (world_size != 2 || capacity == 0) return 0;
  return 2 * ll128_slot_bytes(capacity);
}

void launch_one_shot_ll128(const Params& p, const LaunchTuning& tuning, DataType type, ReduceOp op, int num_sms,
                           cudaStream_t stream) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    using T = decltype(type_tag);
    const int blocks = std::max(1, std::min(num_sms, kMaxBlocks));
    launch_kernel(one_shot_ll128_kernel<T, decltype(op_tag)::value>, blocks, kThreads, tuning.dependent_launch,
                  stream, p);
  });
}

std::string two_ranks_with_ll128(const CommShape& comm) {
  std::string why = fits_one_node(comm);
  if (why.empty() && comm.world_size != 2) why = "the LL128 one-shot runs on two ranks only";
  return why;
}

}  // namespace

// Internal: AllReduce::run sends two ranks' one-shot calls above the LL protocol's range, up to this entry's
// capacity, here.
const AlgorithmEntry kOneShotLl128Entry{
    "one_shot_ll128", AllReduceAlgorithm::kOneShot, /*internal=*/true, /*spans_nodes=*/false, {nullptr, nullptr},
    &two_ranks_with_ll128, &one_shot_ll128_capacity, &one_shot_ll128_scratch_bytes, &launch_one_shot_ll128,
    nullptr, nullptr};

}  // namespace ferry::allreduce
