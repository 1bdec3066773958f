// EP dispatch across nodes: the pack (send) and receive kernels of the
// cross-node path. Protocol: NOTE [EP across nodes] and NOTE [EP across nodes:
// reuse] in internode_common.cuh.
#include "ep/internode_place.cuh"
#include "ep/ep_trace.cuh"

namespace ferry::ep {
namespace {

// NOTE [EP trace] points. Send: 0 start, 1 reuse wait done, 2 records packed (before the
// last block's puts). Receive: 0 start, 1 every source's data seen, 2 records placed.
FERRY_EP_TRACE_DEFINE(g_trace_net_dispatch_send)
FERRY_EP_TRACE_DEFINE(g_trace_net_dispatch_recv)

// ---------------------------------------------------------------- dispatch

// One (token, chunk) item of destination d's record at `slot` is written (by
// this thread's warp, before a __syncwarp): counts it; the count that completes
// the range sends it (NOTE [EP across nodes: pipelined ranges]).
// The send kernel's call epoch, for the rare thread that completes a range (a block-wide copy
// instead of a 64-bit value carried through the item loop, whose registers are tight).
__shared__ uint64_t dispatch_send_epoch;

__device__ void count_dispatch_item(const NetParams& np, int d, int slot, int parity) {
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int per_range = int(lay.range_records), k = slot / per_range;
  const int records = min(per_range, p.send_token_count[d] - k * per_range);
  if (!count_range_item(np.relay.range_written + size_t(d) * kMaxNetRanges + k, unsigned(records * p.num_chunks)))
    return;
  const size_t offset = lay.header_bytes + size_t(k) * per_range * lay.record_bytes;
  send_range(np, d, kSigDispatchRange + k, dispatch_in(lay, p.world_size, parity, p.rank) + offset,
             dispatch_out(lay, p.world_size, parity, d) + offset, size_t(records) * lay.record_bytes,
             dispatch_send_epoch);
}

// Every destination's box header: its token count, then this rank's rows for every expert. Block scope,
// no barrier at the end. Written when the send starts (the slot is free then, NOTE [EP across nodes:
// reuse]), so the call's tail only signals (or puts) it.
__device__ void write_dispatch_headers(const NetParams& np, int parity, bool bad) {
  const Params& p = np.p;
  for (int d = 0; d < p.world_size; ++d) {
    int32_t* header = reinterpret_cast<int32_t*>(dispatch_target(np, d, parity));
    if (threadIdx.x == 0) header[kHeaderTokens] = bad ? 0 : p.send_token_count[d];
    for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
      header[kHeaderCounts + e] = bad ? 0 : p.send_expert_count[e];
  }
}

// The signal kSigDispatchData to every destination, after the headers (and, with_records, the records)
// written by this block or before its barrier (the other blocks' arrivals at the last block): only the
// signal where the box is stored in place (NVLink, a mapped landing buffer; one thread per destination,
// at once), else one put of the header and, with_records, of the used records. One block.
__device__ void send_dispatch_headers(const NetParams& np, uint64_t epoch, bool bad, bool with_records) {
  const int parity = static_cast<int>(epoch & 1);
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size;
  __syncthreads();  // the headers
  const int d = static_cast<int>(threadIdx.x);
  if (d < W && dev::direct_ptr(np.w, d) != nullptr) signal_call(np.w, d, kSigDispatchData, epoch);
  for (int r = 0; r < W; ++r) {
    if (dev::direct_ptr(np.w, r) != nullptr) continue;
    const int tokens = bad ? 0 : p.send_token_count[r];
    const size_t bytes = lay.header_bytes + (with_records ? size_t(tokens) * lay.record_bytes : 0);
    dev::put_with_signal(np.w, r, dispatch_in(lay, W, parity, p.rank), dispatch_out(lay, W, parity, r), bytes,
                         kSigDispatchData, 1, dev::SourceIn::kSendView);
  }
}

// Chunk c of token t into its record at every destination it picked.
template <bool kQuantize, bool kPipelined>
__device__ void pack_chunk(const NetParams& np, int t, int c, int lane, uint8_t** dst, float** dst_scales,
                           int parity) {
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size;
  const TokenRouting routing = load_token_routing(p, t, lane);
  const int slot = routing.slot;
  const unsigned dst_mask = __ballot_sync(0xffffffffu, slot >= 0);
  if (dst_mask == 0) return;
  int num_dst = 0;
  for (unsigned m = dst_mask; m != 0; m &= m - 1) {
    const int r = __ffs(m) - 1;
    const int s = __shfl_sync(0xffffffffu, slot, r);
    uint8_t* record = dispatch_target(np, r, parity) + lay.header_bytes + size_t(s) * lay.record_bytes;
    // The routing record, once per token (a slot travels whole).
    if (c == 0) write_token_record(p, reinterpret_cast<int32_t*>(record), routing, t, r, lane);
    if (lane == 0) {
      dst[num_dst] = record + lay.row_offset;
      if (p.fp8_out) dst_scales[num_dst] = reinterpret_cast<float*>(record + lay.scales_offset);
    }
    ++num_dst;
  }
  __syncwarp();
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();  // dst / dst_scales are rewritten by the next item; the warp's stores before the counts
  // NOTE [EP across nodes: pipelined ranges]: lane r counts this item into its range at destination r.
  if constexpr (kPipelined)
    if (lane < W && slot >= 0) count_dispatch_item(np, lane, slot, parity);
}

// kPipelined = np.lay.pipelined (high throughput), a template parameter (see place_dispatch_records).
template <bool kQuantize, bool kPipelined>
__global__ void __launch_bounds__(kThreads, 1) net_dispatch_send_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  allow_receive_grid();  // NOTE [Overlapped halves and free SMs]
  if (threadIdx.x == 0) dispatch_send_epoch = epoch;
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_send, 0);
  // NOTE [EP across nodes: reuse] (1, 2): no wait; the slots of this parity are free by the call order.
  __syncthreads();  // dispatch_send_epoch, for the thread that completes a range
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_send, 1);
  // A bad expert id in this call's routing: send nothing (EpBuffer reports it).
  const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
  // The headers first: with ranges (NOTE [EP across nodes: pipelined ranges]) they go at once, and the
  // destinations size their output from them while the records are still being packed; else the last
  // block sends each box whole.
  if (blockIdx.x == 0) {
    write_dispatch_headers(np, parity, bad);
    if constexpr (kPipelined) send_dispatch_headers(np, epoch, bad, /*with_records=*/false);
  }
  if (!bad) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride)
      pack_chunk<kQuantize, kPipelined>(np, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp],
                                        warp_scales[warp], parity);
  }
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_send, 2);
  FERRY_EP_TRACE_REPORT(g_trace_net_dispatch_send, "net_dispatch_send", p, epoch, 3);
  if (!arrive_last<true>(p, kDispatchSend)) return;
  if (!kPipelined) {
    send_dispatch_headers(np, epoch, bad, /*with_records=*/true);
  } else {
    // NOTE [EP across nodes: pipelined ranges]: the ranges this call did not use, then the counters.
    for (int i = threadIdx.x; i < W * int(lay.max_ranges); i += blockDim.x) {
      const int d = i / int(lay.max_ranges), k = i % int(lay.max_ranges);
      const int tokens = bad ? 0 : p.send_token_count[d];
      const int used = (tokens + int(lay.range_records) - 1) / int(lay.range_records);
      if (k >= used) signal_call(w, d, kSigDispatchRange + k, epoch);
      np.relay.range_written[size_t(d) * kMaxNetRanges + k] = 0;
    }
  }
  advance_epoch(p, kDispatchSend, epoch);
}

template <bool kPipelined>
__global__ void __launch_bounds__(kThreads, 1) net_dispatch_recv_kernel(NetParams np) {
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_recv, 0);
  const bool ok = wait_all_ranks_relayed(np, kSigDispatchData, epoch, kPhaseEpDispatch, kRelayDispatchData);
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_recv, 1);
  if (ok)
    place_dispatch_records<kPipelined>(
        np, [&](int s) { return dev::recv_ptr(w, s) + dispatch_in(lay, W, parity, s); }, epoch, w.net_recv != w.local);
  FERRY_EP_TRACE_POINT(g_trace_net_dispatch_recv, 2);
  FERRY_EP_TRACE_REPORT(g_trace_net_dispatch_recv, "net_dispatch_recv", p, epoch, 3);
  wait_for_send_grid();  // NOTE [Overlapped halves and free SMs]
  if (!arrive_last<true>(p, kDispatchRecv)) return;
  FERRY_EP_PHASE_REPORT(g_phase_place_records, "net_dispatch_recv items", p, epoch, 3);
  // No signal that the inboxes were read: the sources know it by the call order (NOTE [EP across nodes: reuse]).
  advance_epoch(p, kDispatchRecv, epoch);
}

static_assert(sizeof(int64_t) * (kMaxExperts + 1) + sizeof(int32_t) * 2 * kMaxExperts + 1024 <= kDefaultSmemBytes,
              "no shared-memory opt-in needed");

}  // namespace

// The dispatch kernels and the layout kernel they follow (load_net_kernels).
void load_net_dispatch_kernels() {
  load_kernels(net_dispatch_send_kernel<true, true>, net_dispatch_send_kernel<true, false>,
               net_dispatch_send_kernel<false, true>, net_dispatch_send_kernel<false, false>,
               net_dispatch_recv_kernel<true>, net_dispatch_recv_kernel<false>);
  load_layout_kernel();
}

void launch_net_dispatch_send(const NetParams& np, cudaStream_t stream) {
  const bool quantize = np.p.fp8_out && !np.p.fp8_in, pipelined = np.lay.pipelined != 0;
  const auto kernel = quantize ? (pipelined ? net_dispatch_send_kernel<true, true> : net_dispatch_send_kernel<true, false>)
                               : (pipelined ? net_dispatch_send_kernel<false, true> : net_dispatch_send_kernel<false, false>);
  kernel<<<np.p.num_blocks, kThreads, 0, stream>>>(np);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_net_dispatch_recv(const NetParams& np, cudaStream_t stream) {
  const size_t smem = net_dispatch_recv_smem_bytes(np.p.world_size, np.p.local_experts, np.p.num_experts);
  // As the dependent grid of the send grid when the halves overlap (NOTE [Overlapped halves and free SMs]).
  launch_dependent(np.lay.pipelined ? net_dispatch_recv_kernel<true> : net_dispatch_recv_kernel<false>,
                   dim3(np.p.num_blocks), dim3(kThreads), smem, stream, np.p.overlapped_receive, np);
}

}  // namespace ferry::ep
