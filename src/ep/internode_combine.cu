// EP combine across nodes: the send (partial sums per home) and receive
// kernels of the cross-node path. Protocol: NOTE [EP across nodes] and NOTE [EP
// across nodes: reuse] in internode_common.cuh.
#include "ep/internode_common.cuh"
#include "ep/ep_trace.cuh"

namespace ferry::ep {
namespace {

// ---------------------------------------------------------------- combine

constexpr int kUnroll = kCombineUnroll;

// The partials go to the combine slot of each source rank's token in this
// parity's outbox (or, over NVLink, the source's inbox).
struct NetTarget {
  const NetParams& np;
  int parity;
  __device__ uint8_t* row(int s, int slot, size_t) {
    return combine_target(np, s, parity) + size_t(slot) * (size_t(np.p.hidden) * 2);
  }
  __device__ void written(int, int, int) {}
};

// NOTE [EP trace] points. Send: 0 start, 1 reuse wait done, 2 partials written (before the
// last block's puts). Receive: 0 start, 1 every rank's partials seen, 2 sums written.
FERRY_EP_TRACE_DEFINE(g_trace_net_combine_send)
FERRY_EP_TRACE_DEFINE(g_trace_net_combine_recv)

__global__ void __launch_bounds__(kThreads, 1) net_combine_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, H = p.hidden;
  const size_t row_bytes = size_t(H) * 2;
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 0);
  load_recv_counts(p, token_count, max_token_count);
  // NOTE [EP across nodes: reuse] (3): the slots of this parity were read in combine epoch - 2.
  const bool ok = wait_all_ranks_relayed(np, kSigCombineConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpCombine,
                                         kRelayCombineConsumed);
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 1);
  if (ok) {
    NetTarget target{np, parity};
    combine_send_items(p, token_count, max_token_count, target);
  }
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 2);
  FERRY_EP_TRACE_REPORT(g_trace_net_combine_send, "net_combine_send", p, epoch, 3);
  if (!arrive_last<true>(p, kCombineSend)) return;
  if (ok) {
    for (int s = 0; s < W; ++s) {
      const size_t bytes = size_t(token_count[s]) * row_bytes;
      if (dev::direct_ptr(w, s) != nullptr || bytes == 0) {  // stored in place, or nothing to send
        __syncthreads();
        if (threadIdx.x == 0) dev::signal(w, s, kSigCombineData, 1);
      } else {
        dev::put_with_signal(w, s, combine_in(lay, W, parity, p.rank), combine_out(lay, W, parity, s), bytes,
                             kSigCombineData, 1, dev::SourceIn::kSendView);
      }
    }
  }
  advance_epoch(p, kCombineSend, epoch);
}

__global__ void __launch_bounds__(kThreads, 1) net_combine_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, H = p.hidden;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  FERRY_EP_TRACE_POINT(g_trace_net_combine_recv, 0);
  const bool ok = wait_all_ranks_relayed(np, kSigCombineData, epoch, kPhaseEpCombine, kRelayCombineData);
  FERRY_EP_TRACE_POINT(g_trace_net_combine_recv, 1);
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (ok && *reinterpret_cast<const volatile int32_t*>(p.layout_error) == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      const unsigned ranks = __ballot_sync(0xffffffffu, slot >= 0);
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      // Lane r: where rank r's partial of this chunk is.
      const uint8_t* partial = slot >= 0 ? reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, lane)) +
                                               combine_in(lay, W, parity, lane) + size_t(slot) * row_bytes + offset
                                         : nullptr;
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (unsigned m = ranks; m != 0; m &= m - 1) {  // rank order: identical rounding everywhere
          const int r = __ffs(m) - 1;
          const uint8_t* src = reinterpret_cast<const uint8_t*>(
              __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(partial), r));
          accumulate_units<true>(acc, src, 1.f, base, chunk_units, lane);
        }
        store_units(out, acc, base, chunk_units, lane);
      }
    }
  }
  FERRY_EP_TRACE_POINT(g_trace_net_combine_recv, 2);
  FERRY_EP_TRACE_REPORT(g_trace_net_combine_recv, "net_combine_recv", p, epoch, 3);
  if (!arrive_last<true>(p, kCombineRecv)) return;
  // Every block is done reading the partials: the expert ranks may reuse them.
  if (ok && threadIdx.x < W) dev::signal(w, static_cast<int>(threadIdx.x), kSigCombineConsumed, 1);
  advance_epoch(p, kCombineRecv, epoch);
}

}  // namespace

void load_net_kernels() {
  load_net_dispatch_kernels();
  cudaFuncAttributes attributes;
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_combine_send_kernel));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_combine_recv_kernel));
}

void launch_net_combine_send(const NetParams& np, cudaStream_t stream) {
  net_combine_send_kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_combine_recv(const NetParams& np, cudaStream_t stream) {
  net_combine_recv_kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
