// Combine: the send half reduces, for every token this rank received, the
// weighted outputs of its local experts (fp32) and writes the bf16 partial sum
// once into the token's home rank; the receive half sums each token's partials
// as soon as they are ready, in rank order (fp32), into out[t]. Protocol:
// NOTE [EP epochs].
#include "ep/ep_device.cuh"
#include "ep/ep_trace.cuh"
#include "ep/rows.cuh"
#include "ferry/cuda_check.hpp"

namespace ferry::ep {
namespace {

constexpr int kUnroll = kCombineUnroll;

// NOTE [EP trace] points. Send: 0 start, 1 homes' consumed words seen, 2 items done.
// Receive: 0 start, 1 items done, 2 (trace builds) the send grid complete.
FERRY_EP_TRACE_DEFINE(g_trace_combine_send)
FERRY_EP_TRACE_DEFINE(g_trace_combine_recv)

// The partial of each received token goes to its home rank's stage, at the
// token's index there; each chunk's ready word is released after it.
struct IntranodeTarget {
  const Params& p;
  uint64_t epoch;
  size_t home_index = 0;
  __device__ uint8_t* row(int s, int, size_t index) {
    home_index = size_t(p.rank) * p.max_tokens + p.slot_src_token[index];
    return p.combine_stage.at(s) + home_index * (size_t(p.hidden) * 2);
  }
  __device__ void written(int s, int c, int lane) {
    if (lane == 0) device::st_release_sys(p.combine_ready.at(s) + home_index * p.num_chunks + c, epoch);
  }
};

__global__ void __launch_bounds__(kThreads, 1) combine_send_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineSend);
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  FERRY_EP_TRACE_POINT(g_trace_combine_send, 0);
  load_recv_counts(p, token_count, max_token_count);
  // Homes must be done reading the partials this rank sent them last time.
  if (wait_all_peers(p, kCombineConsumed, epoch - 1, kPhaseEpCombine)) {
    FERRY_EP_TRACE_POINT(g_trace_combine_send, 1);
    IntranodeTarget target{p, epoch};
    combine_send_items(p, token_count, max_token_count, target);
  }
  FERRY_EP_TRACE_POINT(g_trace_combine_send, 2);
  FERRY_EP_TRACE_REPORT(g_trace_combine_send, "combine_send", p, epoch, 3);
  finish_launch(p, kCombineSend, epoch, -1);
}

__global__ void __launch_bounds__(kThreads, 1) combine_recv_kernel(Params p) {
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int W = p.world_size, H = p.hidden;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 0);
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (*p.layout_error == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      // Lanes r wait for the partial of rank r (all at once).
      int ok = 1;
      if (slot >= 0)
        ok = device::wait_flag_geq(p.combine_ready.at(p.rank) + (size_t(lane) * p.max_tokens + t) * p.num_chunks + c,
                                   epoch, p.wait, lane, kPhaseEpCombine);
      if (!__all_sync(0xffffffffu, ok)) break;
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (unsigned m = ranks; m != 0; m &= m - 1) {  // rank order: identical rounding everywhere
          const int r = __ffs(m) - 1;
          accumulate_units(acc, p.combine_stage.at(p.rank) + (size_t(r) * p.max_tokens + t) * row_bytes + offset, 1.f,
                           base, chunk_units, lane);
        }
        store_units(out, acc, base, chunk_units, lane);
      }
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 1);
#ifdef FERRY_EP_TRACE
  wait_for_send_grid();  // trace builds: point 2 = the send grid complete (finish_launch waits again, at once)
  FERRY_EP_TRACE_POINT(g_trace_combine_recv, 2);
#endif
  FERRY_EP_TRACE_REPORT(g_trace_combine_recv, "combine_recv", p, epoch, 3);
  finish_launch(p, kCombineRecv, epoch, kCombineConsumed);
}

}  // namespace

void launch_combine_send(const Params& p, cudaStream_t stream) {
  combine_send_kernel<<<p.num_blocks, kThreads, 0, stream>>>(p);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_combine_recv(const Params& p, cudaStream_t stream) {
  launch_receive_grid(combine_recv_kernel, p, 0, stream);
}

}  // namespace ferry::ep
