// One LL128 unit (NOTE [LL128 lines], one_shot_ll128.cu) as a warp stores and polls it: the line a lane stores,
// the wait for a unit's four lines with the communicator's timeout, and the pack a lane takes out of them. The
// LL128 one-shot moves every unit this way.
#pragma once

#include <cstdint>

#include "allreduce/allreduce_device.cuh"

namespace ferry::allreduce {

// The 16 bytes lane `lane` stores for its pack `v`: the pack itself, or on a flag lane (8q + 7) half of it (the
// low half on lane 7 of a 16-lane half, the high half on lane 15) below the launch's 64-bit epoch.
__device__ __forceinline__ uint4 ll128_line(const uint4& v, bool flag_lane, bool high_half, uint32_t tag_lo,
                                            uint32_t tag_hi) {
  return flag_lane ? make_uint4(high_half ? v.z : v.x, high_half ? v.w : v.y, tag_lo, tag_hi) : v;
}

// Warp-uniform: every lane loads its 16 bytes of the unit at `src` (this lane's address) until all four flag
// lanes read the epoch, then `*line` holds them. False on a timeout (reported, naming line 0's flag) or an abort;
// the warp leaves together either way.
__device__ __forceinline__ bool ll128_wait_unit(const char* src, int lane, bool flag_lane, uint32_t tag_lo,
                                                uint32_t tag_hi, const WaitContext& wait, int peer, uint64_t epoch,
                                                uint4* line) {
  uint64_t start = 0;
  uint32_t spins = 0;
  for (;;) {
    *line = device::load16_volatile(src);
    const bool flag_ok = !flag_lane || (line->z == tag_lo && line->w == tag_hi);
    if (__all_sync(0xffffffffu, __shfl_sync(0xffffffffu, flag_ok, lane | 7))) return true;
    if ((++spins & 255u) != 0) continue;
    // The timeout report names the flag this warp saw: line 0's, which lane 7 loaded.
    const uint64_t seen_flag = (uint64_t(__shfl_sync(0xffffffffu, line->w, 7)) << 32) |
                               __shfl_sync(0xffffffffu, line->z, 7);
    int give_up = 0;
    if (lane == 0) {  // one lane decides, so the warp leaves together
      const uint64_t now = device::global_timer_ns();
      if (start == 0) start = now;
      if (*static_cast<volatile int32_t*>(wait.abort_flag) != kDeviceOk) {
        give_up = 1;
      } else if (now - start > wait.timeout_ns) {
        device::report_timeout(wait, peer, kPhaseOneShotExchange, epoch, seen_flag);
        give_up = 1;
      }
    }
    if (__shfl_sync(0xffffffffu, give_up, 0) != 0) return false;
  }
}

// The peer's pack this lane reduces, out of the unit's lines: its own 16 bytes, or on a flag lane the low half it
// carried and the high half lane + 8 carried (pack 14 of each 16-lane half).
__device__ __forceinline__ uint4 ll128_peer_pack(const uint4& line, bool flag_lane) {
  const uint32_t upper_x = __shfl_down_sync(0xffffffffu, line.x, 8);
  const uint32_t upper_y = __shfl_down_sync(0xffffffffu, line.y, 8);
  return flag_lane ? make_uint4(line.x, line.y, upper_x, upper_y) : line;
}

// A reduce warp's end of a unit on two ranks: in place, the paired push warp must have read the unit's packs first
// (it counts the units it stored in *pair_pushed; it waits on nothing, so it gets there), then each lane stores its
// pack's reduction in rank order.
template <typename T, ReduceOp Op>
__device__ __forceinline__ void ll128_store_reduced(const Params& p, T* out, size_t pack, bool has_pack, int lane,
                                                    unsigned* pair_pushed, unsigned seq, const uint4& mine,
                                                    const uint4& theirs) {
  if (lane == 0) {
    while (atomicAdd(pair_pushed, 0u) <= seq) {
    }
  }
  __syncwarp();
  if (has_pack) {
    uint4 raw[kMaxNodeRanks];  // rank order with constant indices
    raw[0] = p.rank() == 0 ? mine : theirs;
    raw[1] = p.rank() == 0 ? theirs : mine;
    store_user_pack(out, pack, p.count, p.aligned, reduce_in_rank_order<T, Op>(raw, 2));
  }
}

}  // namespace ferry::allreduce
