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
// parity's outbox (or, over NVLink or a mapped landing, the source's inbox);
// each written (row, chunk) item is counted into its range, and the count that
// completes a range sends it (NOTE [EP across nodes: pipelined ranges]).
__shared__ uint64_t combine_send_epoch;  // as dispatch_send_epoch (internode_dispatch.cu)

template <bool kPipelined>  // = np.lay.pipelined (high throughput; see place_dispatch_records)
struct NetTarget {
  const NetParams& np;
  int parity;
  const int32_t* token_count;  // rows from each home this call (load_recv_counts)
  int slot = 0;                // of the item in flight (row() comes before written())
  __device__ uint8_t* row(int s, int item_slot, size_t) {
    slot = item_slot;
    return combine_target(np, s, parity) + size_t(item_slot) * (size_t(np.p.hidden) * 2);
  }
  __device__ void written(int s, int, int lane) {  // after the warp's stores (__syncwarp)
    if (!kPipelined || lane != 0) return;
    const int per_range = int(np.lay.combine_range_rows), k = slot / per_range;
    const int rows = min(per_range, token_count[s] - k * per_range);
    if (!count_range_item(np.relay.combine_range_written + size_t(s) * kMaxNetRanges + k,
                          unsigned(rows * np.p.num_chunks)))
      return;
    const int W = np.p.world_size;
    const size_t row_bytes = size_t(np.p.hidden) * 2, offset = size_t(k) * per_range * row_bytes;
    send_range(np, s, kSigCombineRange + k, combine_in(np.lay, W, parity, np.p.rank) + offset,
               combine_out(np.lay, W, parity, s) + offset, size_t(rows) * row_bytes, combine_send_epoch);
  }
};

// NOTE [EP trace] points. Send: 0 start, 1 reuse wait done, 2 partials written (before the
// last block's puts). Receive: 0 start, 1 every rank's partials seen, 2 sums written.
FERRY_EP_TRACE_DEFINE(g_trace_net_combine_send)
FERRY_EP_TRACE_DEFINE(g_trace_net_combine_recv)

template <bool kPipelined>
__global__ void __launch_bounds__(kThreads, 1) net_combine_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  if (threadIdx.x == 0) combine_send_epoch = epoch;  // read after the wait's block barrier
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 0);
  load_recv_counts(p, token_count, max_token_count);
  // NOTE [EP across nodes: reuse] (3): with ranges, the slots of this parity were read in combine epoch - 2;
  // one box per home (low latency): free by the call order, only the block barrier (the counts, the epoch).
  const bool ok = wait_all_ranks_relayed(np, kSigCombineConsumed, kPipelined && epoch > 2 ? epoch - 2 : 0,
                                         kPhaseEpCombine, kRelayCombineConsumed);
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 1);
  if (ok) {
    NetTarget<kPipelined> target{np, parity, token_count};
    combine_send_items(p, token_count, max_token_count, target);
  }
  FERRY_EP_TRACE_POINT(g_trace_net_combine_send, 2);
  FERRY_EP_TRACE_REPORT(g_trace_net_combine_send, "net_combine_send", p, epoch, 3);
  if (!arrive_last<true>(p, kCombineSend)) return;
  if (ok && !kPipelined) {
    // One put of the used rows (or only the signal) per home.
    const size_t row_bytes = size_t(p.hidden) * 2;
    for (int s = 0; s < W; ++s) {
      const size_t bytes = size_t(token_count[s]) * row_bytes;
      if (dev::direct_ptr(w, s) != nullptr || bytes == 0) {  // stored in place, or nothing to send
        __syncthreads();
        if (threadIdx.x == 0) signal_call(w, s, kSigCombineData, epoch);
      } else {
        dev::put_with_signal(w, s, combine_in(lay, W, parity, p.rank), combine_out(lay, W, parity, s), bytes,
                             kSigCombineData, 1, dev::SourceIn::kSendView);
      }
    }
  } else if (ok) {
    // NOTE [EP across nodes: pipelined ranges]: the ranges this call did not use, then the counters.
    const int per_range = int(lay.combine_range_rows), max_ranges = int(lay.combine_max_ranges);
    for (int i = threadIdx.x; i < W * max_ranges; i += blockDim.x) {
      const int s = i / max_ranges, k = i % max_ranges;
      if (k >= (token_count[s] + per_range - 1) / per_range) signal_call(w, s, kSigCombineRange + k, epoch);
      np.relay.combine_range_written[size_t(s) * kMaxNetRanges + k] = 0;
    }
  }
  advance_epoch(p, kCombineSend, epoch);
}

template <bool kPipelined>
__global__ void __launch_bounds__(kThreads, 1) net_combine_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, H = p.hidden;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  const int warp = threadIdx.x >> 5;
  FERRY_EP_TRACE_POINT(g_trace_net_combine_recv, 0);
  constexpr bool pipelined = kPipelined;
  // One box per expert rank: wait for all of them first. Ranges: each warp waits for what it reads.
  bool ok = pipelined || wait_all_ranks_relayed(np, kSigCombineData, epoch, kPhaseEpCombine, kRelayCombineData);
  FERRY_EP_TRACE_POINT(g_trace_net_combine_recv, 1);
  // A bad expert id in this call's routing: nothing was sent, nothing is written.
  if (ok && *reinterpret_cast<const volatile int32_t*>(p.layout_error) == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    // NOTE [EP across nodes: pipelined ranges]: warp kWarps - 1 of block 0 relays; the others renumber around it.
    int first = loop.first, stride = loop.stride;
    if constexpr (pipelined) {
      if (take_relay_warp(p, first, stride)) {
        // Lane r: this rank sent expert rank r send_token_count[r] tokens; their partials come back in ranges.
        relay_ranges(np, p.send_token_count, int(lay.combine_range_rows), kSigCombineRange, kRelayCombineRanges,
                     epoch, kPhaseEpCombine);
        first = items;
      }
    }
    __shared__ int landed[kWarps][kMaxRanks];  // ranges this warp saw published, per expert rank
    if constexpr (pipelined) {
      if (lane < kMaxRanks) landed[warp][lane] = 0;
      __syncwarp();
    }
    [[maybe_unused]] const int per_range = int(lay.combine_range_rows);
    for (int item = first; item < items; item += stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
      if constexpr (pipelined) {
        // Lane r: rank r's range of this slot is published.
        const int waited = slot < 0 || wait_range_landed(np.relay.flags + kRelayCombineRanges + lane, epoch,
                                                         slot / per_range, landed[warp][lane], p.wait, lane,
                                                         kPhaseEpCombine);
        if (!__all_sync(0xffffffffu, waited)) {  // aborted: the host reports it
          ok = false;
          break;
        }
        __syncwarp();  // each lane's acquire before the warp reads the partials
      }
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
  wait_for_send_grid();  // NOTE [Overlapped halves and free SMs]
  if (!arrive_last<true>(p, kCombineRecv)) return;
  // Every block is done reading the partials: the expert ranks may reuse them (with ranges; one box per
  // expert rank: they know it by the call order, NOTE [EP across nodes: reuse]).
  if (pipelined && ok && threadIdx.x < W) signal_call(w, static_cast<int>(threadIdx.x), kSigCombineConsumed, epoch);
  advance_epoch(p, kCombineRecv, epoch);
}

}  // namespace

void load_net_kernels() {
  load_net_dispatch_kernels();
  load_kernels(net_combine_send_kernel<true>, net_combine_send_kernel<false>, net_combine_recv_kernel<true>,
               net_combine_recv_kernel<false>);
}

void launch_net_combine_send(const NetParams& np, cudaStream_t stream) {
  (np.lay.pipelined ? net_combine_send_kernel<true> : net_combine_send_kernel<false>)<<<np.p.num_blocks, kThreads, 0,
                                                                                         stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_combine_recv(const NetParams& np, cudaStream_t stream) {
  // As the dependent grid of the send grid when the halves overlap (NOTE [Overlapped halves and free SMs]).
  launch_dependent(np.lay.pipelined ? net_combine_recv_kernel<true> : net_combine_recv_kernel<false>,
                   dim3(np.p.num_blocks), dim3(kThreads), 0, stream, np.p.overlapped_receive, np);
}

}  // namespace ferry::ep
