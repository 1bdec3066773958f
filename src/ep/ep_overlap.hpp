// The overlapped halves of EpBuffer::dispatch() and combine(): the send half on
// a high-priority side stream and the receive half at the same time on the
// caller's stream (it consumes tokens as they land), num_sms split between the
// two grids, the side stream forked from and joined back into the caller's
// stream by events (NOTE [Overlapped halves and free SMs]).
#pragma once

#include <cuda_runtime.h>

namespace ferry::ep {

// NOTE [Overlapped halves and free SMs]
// The receive grid waits for data the send grid writes (this rank's and its
// peers'); the send grid never waits for a receive grid of the same call. So
// the halves progress on any number of free SMs (a user's kernels may hold the
// rest) as long as a receive block never takes an SM that a pending send block
// of this rank could have had:
//  - the send half runs on a stream of the greatest priority, so its pending
//    blocks are dispatched before the receive half's (de facto CUDA behaviour,
//    like the in-order block dispatch the AllReduce pairing relies on);
//  - the receive half is released (`ready`) only right before the send kernel
//    is launched, after the layout kernels and anything else the send half
//    queues first, so it never holds SMs those need.
// The separate halves (dispatch_send then dispatch_recv) need none of this.
struct SideStream {
  cudaStream_t side = nullptr;  // the send half's stream when overlapping (greatest priority)
  cudaEvent_t fork = nullptr, ready = nullptr, join = nullptr;

  void create();             // throws CudaError
  void destroy() noexcept;   // what create() made; safe on a partly created set
  void fork_from(cudaStream_t stream);  // side waits for what `stream` has so far
  void release(cudaStream_t stream);    // `stream` waits for what side has so far (before the send kernel)
  void join_into(cudaStream_t stream);  // `stream` waits for what side has so far
};

// Set by dispatch()/combine() around their halves: grids of the concurrent
// halves, and the count synchronization deferred past the join. Zero grids:
// the halves run alone with num_sms blocks each.
struct HalfGrids {
  int send_blocks = 0, recv_blocks = 0;
  bool defer_sync = false;
  cudaStream_t release_to = nullptr;  // the receive half's stream, released before the send kernel
};

// Scoped: the overlapped halves' settings, reset however the calls end.
class OverlapScope {
 public:
  OverlapScope(HalfGrids& grids, int num_sms, int recv_blocks, cudaStream_t recv_stream) : grids_(grids) {
    grids_.recv_blocks = recv_blocks;
    grids_.send_blocks = num_sms - recv_blocks;
    grids_.defer_sync = true;
    grids_.release_to = recv_stream;
  }
  ~OverlapScope() {
    grids_.send_blocks = grids_.recv_blocks = 0, grids_.defer_sync = false;
    grids_.release_to = nullptr;
  }
  OverlapScope(const OverlapScope&) = delete;
  OverlapScope& operator=(const OverlapScope&) = delete;

 private:
  HalfGrids& grids_;
};

}  // namespace ferry::ep
