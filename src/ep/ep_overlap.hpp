// The overlapped halves of EpBuffer::dispatch() and combine(): both on the
// caller's stream, the receive grid launched while the send grid runs (it
// consumes tokens as they land; NOTE [Overlapped halves and free SMs] in
// ep_device.cuh), num_sms split between the two grids.
#pragma once

#include <cuda_runtime.h>

namespace ferry::ep {

// Set by dispatch()/combine() around their halves: grids of the concurrent
// halves, and the count synchronization deferred until both halves are queued.
// Zero grids: the halves run alone with num_sms blocks each.
struct HalfGrids {
  int send_blocks = 0, recv_blocks = 0;
  bool defer_sync = false;
  bool one_grid = false;  // dispatch(): the send grid does the receive half's work (NOTE [EP rank rows one grid])
  bool one_role = false;  // combine(): the send grid reduces and sums every token (NOTE [EP combine one role])
};

// Scoped: the overlapped halves' settings, reset however the calls end.
class OverlapScope {
 public:
  OverlapScope(HalfGrids& grids, int num_sms, int recv_blocks, bool one_role = false) : grids_(grids) {
    grids_.recv_blocks = recv_blocks;
    grids_.send_blocks = num_sms - recv_blocks;
    grids_.defer_sync = true;
    grids_.one_role = one_role;
  }
  // One grid of num_sms send blocks that also does the receive half's work.
  OverlapScope(HalfGrids& grids, int num_sms) : grids_(grids) {
    grids_.send_blocks = num_sms;
    grids_.one_grid = true;
    grids_.defer_sync = true;
  }
  ~OverlapScope() {
    grids_.send_blocks = grids_.recv_blocks = 0;
    grids_.defer_sync = grids_.one_grid = grids_.one_role = false;
  }
  OverlapScope(const OverlapScope&) = delete;
  OverlapScope& operator=(const OverlapScope&) = delete;

 private:
  HalfGrids& grids_;
};

}  // namespace ferry::ep
