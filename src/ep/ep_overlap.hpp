// The overlapped halves of EpBuffer::dispatch() and combine(): the send half on
// the caller's stream and the receive half at the same time on a side stream
// (it consumes tokens as they land), num_sms split between the two grids, the
// side stream forked from and joined back into the caller's stream by events.
#pragma once

#include <cuda_runtime.h>

namespace ferry::ep {

// The side stream and its fork/join events (one set per EpBuffer).
struct SideStream {
  cudaStream_t side = nullptr;  // the receive half's stream when overlapping
  cudaEvent_t fork = nullptr, join = nullptr;

  void create();             // throws CudaError
  void destroy() noexcept;   // what create() made; safe on a partly created set
  void fork_from(cudaStream_t stream);  // side waits for what `stream` has so far
  void join_into(cudaStream_t stream);  // `stream` waits for what side has so far
};

// Set by dispatch()/combine() around their halves: grids of the concurrent
// halves, and the count synchronization deferred past the join. Zero grids:
// the halves run alone with num_sms blocks each.
struct HalfGrids {
  int send_blocks = 0, recv_blocks = 0;
  bool defer_sync = false;
};

// Scoped: the overlapped halves' settings, reset however the calls end.
class OverlapScope {
 public:
  OverlapScope(HalfGrids& grids, int num_sms, int recv_blocks) : grids_(grids) {
    grids_.recv_blocks = recv_blocks;
    grids_.send_blocks = num_sms - recv_blocks;
    grids_.defer_sync = true;
  }
  ~OverlapScope() { grids_.send_blocks = grids_.recv_blocks = 0, grids_.defer_sync = false; }
  OverlapScope(const OverlapScope&) = delete;
  OverlapScope& operator=(const OverlapScope&) = delete;

 private:
  HalfGrids& grids_;
};

}  // namespace ferry::ep
