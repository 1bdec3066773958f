// EP combine across nodes: the send (partial sums per home) and receive
// kernels of the cross-node path. Protocol: NOTE [EP across nodes] and NOTE [EP
// across nodes: reuse] in net_common.cuh.
#include "ep/net_common.cuh"

namespace ferry::ep {
namespace {

// ---------------------------------------------------------------- combine

constexpr int kUnroll = kCombineUnroll;

__global__ void __launch_bounds__(kThreads, 1) net_combine_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, K = p.topk, H = p.hidden;
  const size_t row_bytes = size_t(H) * 2;
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ const uint8_t* warp_rows[kWarps][kMaxTopk];
  __shared__ float warp_weights[kWarps][kMaxTopk];
  if (threadIdx.x == 0) {
    max_token_count = 0;
    for (int s = 0; s < W; ++s) {
      token_count[s] = p.recv_token_count[s];
      max_token_count = max(max_token_count, token_count[s]);
    }
  }
  // NOTE [EP across nodes: reuse] (3): the slots of this parity were read in combine epoch - 2.
  const bool ok = wait_all_ranks(np, kSigCombineConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpCombine);
  if (ok) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint8_t* outputs = static_cast<const uint8_t*>(p.expert_outputs);
    const ItemCursor cursor{W, max_token_count, p.num_chunks};
    const ItemLoop loop(p);
    for (int item = loop.first; item < cursor.total(); item += loop.stride) {
      int s, slot, c;
      if (!cursor.decode(item, token_count, s, slot, c)) continue;
      const size_t index = size_t(s) * p.max_tokens + slot;
      const int row = lane < K ? p.slot_rows[index * K + lane] : -1;
      const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
      int num_rows = 0;
      for (unsigned m = rows_mask; m != 0; m &= m - 1) {
        const int k = __ffs(m) - 1;
        if (lane == k) {
          warp_rows[warp][num_rows] = outputs + size_t(row) * row_bytes;
          warp_weights[warp][num_rows] = p.with_weights ? p.out_weights[row] : 1.f;
        }
        ++num_rows;
      }
      __syncwarp();
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      uint8_t* dst = combine_target(np, s, parity) + size_t(slot) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (int j = 0; j < num_rows; ++j)
          accumulate_units<false>(acc, warp_rows[warp][j] + offset, warp_weights[warp][j], base, chunk_units, lane);
        store_units(dst, acc, base, chunk_units, lane);
      }
      __syncwarp();  // warp_rows / warp_weights are rewritten by the next item
    }
  }
  if (!arrive_last(p, kCombineSend)) return;
  if (ok) {
    for (int s = 0; s < W; ++s) {
      const size_t bytes = size_t(token_count[s]) * row_bytes;
      if (dev::is_nvlink_peer(w, s) || bytes == 0) {
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
  const bool ok = wait_all_ranks(np, kSigCombineData, epoch, kPhaseEpCombine);
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
  if (!arrive_last(p, kCombineRecv)) return;
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
