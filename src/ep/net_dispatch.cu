// EP dispatch across nodes: the pack (send) and receive kernels of the
// cross-node path. Protocol: NOTE [EP across nodes] and NOTE [EP across nodes:
// reuse] in net_common.cuh.
#include "ep/net_common.cuh"

namespace ferry::ep {
namespace {

// ---------------------------------------------------------------- dispatch

// Chunk c of token t into its record at every destination it picked.
template <bool kQuantize>
__device__ void pack_chunk(const NetParams& np, int t, int c, int lane, uint8_t** dst, float** dst_scales,
                           int parity) {
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size, K = p.topk, Le = p.local_experts;
  const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
  const int e = lane < K ? p.token_expert[size_t(t) * K + lane] : -1;
  const int pos = lane < K ? p.pos_in_expert[size_t(t) * K + lane] : -1;
  const float w = (lane < K && p.with_weights) ? p.topk_weights[size_t(t) * K + lane] : 1.f;
  const unsigned dst_mask = __ballot_sync(0xffffffffu, slot >= 0);
  if (dst_mask == 0) return;
  int num_dst = 0;
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    const int s = __shfl_sync(0xffffffffu, slot, r);
    uint8_t* record = dispatch_target(np, r, parity) + lay.header_bytes + size_t(s) * lay.record_bytes;
    if (c == 0) {  // the routing record, once per token (a slot travels whole)
      int32_t* meta = reinterpret_cast<int32_t*>(record);
      const bool here = e >= 0 && e / Le == r;
      if (lane == 0) meta[0] = t;
      if (lane < K) {
        meta[1 + lane] = here ? e % Le : -1;
        meta[1 + K + lane] = pos;
        reinterpret_cast<float*>(meta)[1 + 2 * K + lane] = w;
      }
    }
    if (lane == 0) {
      dst[num_dst] = record + lay.row_offset;
      if (p.fp8_out) dst_scales[num_dst] = reinterpret_cast<float*>(record + lay.scales_offset);
    }
    ++num_dst;
  }
  __syncwarp();
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();  // dst / dst_scales are rewritten by the next item
}

template <bool kQuantize>
__global__ void __launch_bounds__(kThreads, 1) net_dispatch_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  // NOTE [EP across nodes: reuse] (1, 2): the slots of this parity were read in call epoch - 2.
  const bool ok = wait_all_ranks(np, kSigDispatchConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpDispatch);
  // A bad expert id in this call's routing: send nothing (EpBuffer reports it).
  const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
  if (ok && !bad) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride)
      pack_chunk<kQuantize>(np, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp], warp_scales[warp],
                            parity);
  }
  if (!arrive_last(p, kDispatchSend)) return;
  if (ok) {
    for (int d = 0; d < W; ++d) {
      uint8_t* box = dispatch_target(np, d, parity);
      int32_t* header = reinterpret_cast<int32_t*>(box);
      const int tokens = bad ? 0 : p.send_token_count[d];
      if (threadIdx.x == 0) header[kHeaderTokens] = tokens;
      for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
        header[kHeaderCounts + e] = bad ? 0 : p.send_expert_count[e];
      if (dev::is_nvlink_peer(w, d)) {
        __syncthreads();  // the header, then the signal (the records: before every block's arrival)
        if (threadIdx.x == 0) dev::signal(w, d, kSigDispatchData, 1);
      } else {
        dev::put_with_signal(w, d, dispatch_in(lay, W, parity, p.rank), dispatch_out(lay, W, parity, d),
                             lay.header_bytes + size_t(tokens) * lay.record_bytes, kSigDispatchData, 1,
                             dev::SourceIn::kSendView);
      }
    }
  }
  advance_epoch(p, kDispatchSend, epoch);
}

__global__ void __launch_bounds__(kThreads, 1) net_dispatch_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, Le = p.local_experts, K = p.topk, E = p.num_experts;
  const int mine = p.rank * Le;  // this rank's first global expert
  extern __shared__ __align__(16) uint8_t recv_smem[];
  int64_t* offsets = reinterpret_cast<int64_t*>(recv_smem);  // [Le + 1]: first row of each local expert, then the end
  int32_t* totals = reinterpret_cast<int32_t*>(offsets + Le + 1);  // [E]: rows per expert from all sources
  int32_t* base = totals + E;                                      // [W][Le]: first row of (source, local expert)
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  __shared__ int64_t needed[kMaxRanks];
  const bool ok = wait_all_ranks(np, kSigDispatchData, epoch, kPhaseEpDispatch);
  if (ok) {
    auto header = [&](int s) {
      return reinterpret_cast<const volatile int32_t*>(dev::recv_ptr(w, s) + dispatch_in(lay, W, parity, s));
    };
    for (int i = threadIdx.x; i < E; i += kThreads) {
      int total = 0;
      for (int s = 0; s < W; ++s) total += header(s)[kHeaderCounts + i];
      totals[i] = total;
    }
    for (int i = threadIdx.x; i < W * Le; i += kThreads) {
      const int s = i / Le, le = i % Le;
      int before = 0;
      for (int q = 0; q < s; ++q) before += header(q)[kHeaderCounts + mine + le];
      base[i] = before;
    }
    if (threadIdx.x < W) token_count[threadIdx.x] = header(threadIdx.x)[kHeaderTokens];
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp < W) {  // warp r: the rows rank r needs (every rank sees every rank's overflow)
      const int64_t rows = warp_expert_offsets(
          p, Le, lane, [&](int le) { return int64_t(totals[warp * Le + le]); },
          [&](int le, int64_t start) {
            if (warp == p.rank) offsets[le] = start;
          });
      if (lane == 0) {
        needed[warp] = rows;
        if (warp == p.rank) offsets[Le] = rows;
      }
    } else if (warp == kWarps - 1) {
      const int most = __reduce_max_sync(0xffffffffu, lane < W ? token_count[lane] : 0);
      if (lane == 0) max_token_count = most;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < W * Le; i += kThreads) base[i] += int32_t(offsets[i % Le]);
    // NOTE [EP overflow is collective]: the lowest rank whose output would overflow.
    if (blockIdx.x == 0 && threadIdx.x == 0 && !p.low_latency) {
      for (int r = 0; r < W; ++r) {
        if (needed[r] <= p.capacity_rows) continue;
        if (p.status->code == kEpOk) {
          p.status->value = needed[r];
          p.status->rank = r;
          __threadfence_system();
          p.status->code = kEpTooManyRows;
        }
        break;
      }
    }
    __syncthreads();
    const bool overflow = !p.low_latency && needed[p.rank] > p.capacity_rows;
    if (blockIdx.x == 0) {
      if (!overflow) {
        for (int le = threadIdx.x; le <= Le; le += kThreads) p.expert_offsets[le] = offsets[le];
        for (int le = threadIdx.x; le < Le; le += kThreads) p.expert_counts[le] = totals[mine + le];
      }
      // An overflowed rank received nothing: its combine sends nothing.
      if (threadIdx.x < W) p.recv_token_count[threadIdx.x] = overflow ? 0 : token_count[threadIdx.x];
    }
    if (!overflow) {
      __shared__ uint8_t* warp_rows[kWarps][kMaxTopk];
      const int elem = p.fp8_out ? 1 : 2;
      const size_t out_row_bytes = size_t(p.hidden) * elem;
      const int groups = p.hidden / kScaleBlock;
      const ItemCursor cursor{W, max_token_count, p.num_chunks};
      const ItemLoop loop(p);
      for (int item = loop.first; item < cursor.total(); item += loop.stride) {
        int s, slot, c;
        if (!cursor.decode(item, token_count, s, slot, c)) continue;
        const size_t index = size_t(s) * p.max_tokens + slot;
        const uint8_t* record =
            reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, s)) + dispatch_in(lay, W, parity, s) +
            lay.header_bytes + size_t(slot) * lay.record_bytes;
        const volatile int32_t* meta = reinterpret_cast<const volatile int32_t*>(record);
        int row = -1;
        if (lane < K) {
          const int le = meta[1 + lane];
          if (le >= 0) row = base[s * Le + le] + meta[1 + K + lane];
          if (c == 0) {  // the token's bookkeeping, once
            if (row >= 0 && p.with_weights)
              p.out_weights[row] = reinterpret_cast<const volatile float*>(meta)[1 + 2 * K + lane];
            p.slot_rows[index * K + lane] = row;
          }
        }
        if (lane == 0 && c == 0) p.slot_src_token[index] = meta[0];
        const unsigned rows_mask = __ballot_sync(0xffffffffu, row >= 0);
        int num_rows = 0;
        for (unsigned m = rows_mask; m != 0; m &= m - 1) {
          const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
          if (lane == 0) warp_rows[warp][num_rows] = p.out_tokens + size_t(r) * out_row_bytes;
          ++num_rows;
        }
        __syncwarp();
        const int begin = chunk_begin(p, c), end = chunk_end(p, c);
        copy_units_to_rows<kRecvUnroll, true>(record + lay.row_offset + size_t(begin) * elem, warp_rows[warp], num_rows,
                                         size_t(begin) * elem, (end - begin) * elem / 16, lane);
        if (p.fp8_out) {
          const volatile float* scales = reinterpret_cast<const volatile float*>(record + lay.scales_offset);
          for (unsigned m = rows_mask; m != 0; m &= m - 1) {
            const int r = __shfl_sync(0xffffffffu, row, __ffs(m) - 1);
            for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32)
              p.out_scales[size_t(r) * groups + g] = scales[g];
          }
        }
        __syncwarp();
      }
    }
  }
  if (!arrive_last(p, kDispatchRecv)) return;
  // Every block is done reading the inboxes: the sources may reuse them (NOTE [EP across nodes: reuse]).
  if (ok && threadIdx.x < W) dev::signal(w, static_cast<int>(threadIdx.x), kSigDispatchConsumed, 1);
  advance_epoch(p, kDispatchRecv, epoch);
}

size_t net_dispatch_recv_smem_bytes(int world_size, int local_experts, int num_experts) {
  return sizeof(int64_t) * (local_experts + 1) + sizeof(int32_t) * (num_experts + size_t(world_size) * local_experts);
}
static_assert(sizeof(int64_t) * (kMaxExperts + 1) + sizeof(int32_t) * 2 * kMaxExperts + 1024 <= kDefaultSmemBytes,
              "no shared-memory opt-in needed");

}  // namespace

// The dispatch kernels and the layout kernel they follow (load_net_kernels).
void load_net_dispatch_kernels() {
  cudaFuncAttributes attributes;
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_send_kernel<true>));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_send_kernel<false>));
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, net_dispatch_recv_kernel));
  load_layout_kernel();
}

void launch_net_dispatch_send(const NetParams& np, cudaStream_t stream) {
  const auto kernel =
      np.p.fp8_out && !np.p.fp8_in ? net_dispatch_send_kernel<true> : net_dispatch_send_kernel<false>;
  kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_dispatch_recv(const NetParams& np, cudaStream_t stream) {
  const size_t smem = net_dispatch_recv_smem_bytes(np.p.world_size, np.p.local_experts, np.p.num_experts);
  net_dispatch_recv_kernel<<<np.p.num_blocks, kThreads, smem, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
