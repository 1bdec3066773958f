// CallbackBootstrap: all_gather and barrier supplied as functions (the Python layer
// wraps torch.distributed). Only validates and forwards.
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace ferry {

CallbackBootstrap::CallbackBootstrap(int rank, int size, AllGatherFn all_gather, BarrierFn barrier)
    : rank_(rank), size_(size), all_gather_(std::move(all_gather)), barrier_(std::move(barrier)) {
  FERRY_ARG_CHECK(size >= 1, "CallbackBootstrap: size must be >= 1, got " << size);
  FERRY_ARG_CHECK(rank >= 0 && rank < size, "CallbackBootstrap: rank must be in [0, " << size << "), got " << rank);
  FERRY_ARG_CHECK(static_cast<bool>(all_gather_), "CallbackBootstrap: all_gather function is empty");
  FERRY_ARG_CHECK(static_cast<bool>(barrier_), "CallbackBootstrap: barrier function is empty");
}

void CallbackBootstrap::all_gather(const void* send, void* recv, size_t bytes_per_rank) {
  FERRY_ARG_CHECK(bytes_per_rank == 0 || (send != nullptr && recv != nullptr),
                  "CallbackBootstrap::all_gather: null buffer with bytes_per_rank " << bytes_per_rank);
  all_gather_(send, recv, bytes_per_rank);
}

void CallbackBootstrap::barrier() { barrier_(); }

}  // namespace ferry
