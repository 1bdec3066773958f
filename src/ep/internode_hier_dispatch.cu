// Hierarchical high-throughput EP dispatch across nodes (the default; FERRY_EP_HIERARCHICAL=0: direct):
// the forward-index, pack, forward and receive kernels. Protocol: NOTE [EP
// hierarchical] and NOTE [EP hierarchical reuse] in internode_hier.cuh.
#include "ep/internode_hier.cuh"
#include "ep/internode_place.cuh"

namespace ferry::ep {
namespace {

constexpr int kIndexThreads = 512;

// One block: each token's record index in the forward box of every other node
// it goes to (tokens in order), and the record count per node.
__global__ void __launch_bounds__(kIndexThreads, 1) hier_forward_index_kernel(HierParams h) {
  const Params& p = h.np.p;
  const int T = p.num_tokens, W = p.world_size, N = h.num_nodes;
  __shared__ int32_t counts[kIndexThreads][kMaxRanks];
  const int per = (T + kIndexThreads - 1) / kIndexThreads;
  const int begin = min(T, int(threadIdx.x) * per), end = min(T, begin + per);
  auto nodes_of = [&](int t) {  // bit n: the token goes to a rank of node n (not this one)
    unsigned nodes = 0;
    for (int r = 0; r < W; ++r)
      if (p.token_slot[size_t(t) * W + r] >= 0) nodes |= 1u << h.node_of[r];
    return nodes & ~(1u << h.node);
  };
  for (int n = 0; n < kMaxRanks; ++n) counts[threadIdx.x][n] = 0;
  for (int t = begin; t < end; ++t)
    for (unsigned m = nodes_of(t); m != 0; m &= m - 1) ++counts[threadIdx.x][__ffs(m) - 1];
  __syncthreads();
  if (threadIdx.x < N) {
    const int n = threadIdx.x;
    int run = 0;
    for (int i = 0; i < kIndexThreads; ++i) {
      const int v = counts[i][n];
      counts[i][n] = run;
      run += v;
    }
    h.fwd_count[n] = run;
  }
  __syncthreads();
  for (int t = begin; t < end; ++t) {
    const unsigned nodes = nodes_of(t);
    for (int n = 0; n < N; ++n)
      h.fwd_index[size_t(t) * N + n] = ((nodes >> n) & 1u) ? counts[threadIdx.x][n]++ : -1;
  }
}

// Chunk c of token t: into its record at every destination of this node, and
// into one forward record per other node it goes to.
template <bool kQuantize>
__device__ void hier_pack_chunk(const HierParams& h, int t, int c, int lane, uint8_t** dst, float** dst_scales,
                                int parity, unsigned this_node) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const NetLayout& lay = np.lay;
  const int W = p.world_size, K = p.topk, Le = p.local_experts, N = h.num_nodes, R = h.per_node;
  const int slot = lane < W ? p.token_slot[size_t(t) * W + lane] : -1;
  const int e = lane < K ? p.token_expert[size_t(t) * K + lane] : -1;
  const int pos = lane < K ? p.pos_in_expert[size_t(t) * K + lane] : -1;
  const float wt = (lane < K && p.with_weights) ? p.topk_weights[size_t(t) * K + lane] : 1.f;
  const unsigned dst_mask = __ballot_sync(0xffffffffu, slot >= 0);
  if (dst_mask == 0) return;
  int num_dst = 0;
  auto write_meta = [&](int32_t* meta, int expert) {
    if (lane == 0) meta[0] = t;
    if (lane < K) {
      meta[1 + lane] = expert;
      meta[1 + K + lane] = pos;
      reinterpret_cast<float*>(meta)[1 + 2 * K + lane] = wt;
    }
  };
  auto add_dst = [&](uint8_t* record) {
    if (lane == 0) {
      dst[num_dst] = record + lay.row_offset;
      if (p.fp8_out) dst_scales[num_dst] = reinterpret_cast<float*>(record + lay.scales_offset);
    }
    ++num_dst;
  };
  for (unsigned m = dst_mask & this_node; m != 0; m &= m - 1) {  // this node: as the direct path
    const int r = __ffs(m) - 1;
    const int s = __shfl_sync(0xffffffffu, slot, r);
    uint8_t* record = reinterpret_cast<uint8_t*>(device::node_ptr(np.w, r)) + dispatch_in(lay, W, parity, p.rank) +
                      lay.header_bytes + size_t(s) * lay.record_bytes;
    if (c == 0) write_meta(reinterpret_cast<int32_t*>(record), e >= 0 && e / Le == r ? e % Le : -1);
    add_dst(record);
  }
  for (int n = 0; n < N; ++n) {  // other nodes: one forward record each
    if (n == h.node) continue;
    const int local_slot = __shfl_sync(0xffffffffu, slot, lane < R ? h.rank_at[n * R + lane] : 0);
    const int mine = lane < R ? local_slot : -1;
    const unsigned local_mask = __ballot_sync(0xffffffffu, mine >= 0);
    if (local_mask == 0) continue;
    uint8_t* record = forward_box(h, parity, n) + h.hl.fwd_header_bytes +
                      size_t(h.fwd_index[size_t(t) * N + n]) * h.hl.fwd_record_bytes;
    if (c == 0) {
      int32_t* prefix = reinterpret_cast<int32_t*>(record);
      if (lane == 0) prefix[kFwdMask] = static_cast<int32_t>(local_mask);
      if (lane < R) prefix[kFwdSlots + lane] = mine;
      write_meta(prefix + kFwdPrefixWords, e);
    }
    add_dst(record + sizeof(int32_t) * kFwdPrefixWords);
  }
  __syncwarp();
  write_row_chunk<kQuantize>(p, t, chunk_begin(p, c), chunk_end(p, c), lane, dst, dst_scales, num_dst);
  __syncwarp();
}

template <bool kQuantize>
__global__ void __launch_bounds__(kThreads, 1) hier_dispatch_send_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchSend);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, R = h.per_node;
  __shared__ uint8_t* warp_dst[kWarps][kMaxRanks];
  __shared__ float* warp_scales[kWarps][kMaxRanks];
  const unsigned this_node = node_ranks(h), peers = remote_peers(h);
  // NOTE [EP hierarchical reuse] (1, 2): this node's inboxes and the forward boxes of this parity.
  const bool ok = wait_ranks(h, this_node | peers, kSigDispatchConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpDispatch);
  const bool bad = *reinterpret_cast<const volatile int32_t*>(p.layout_error) != 0;
  if (ok && !bad) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride)
      hier_pack_chunk<kQuantize>(h, item / p.num_chunks, item % p.num_chunks, lane, warp_dst[warp],
                                 warp_scales[warp], parity, this_node);
  }
  if (!arrive_last<true>(p, kDispatchSend)) return;
  if (ok) {
    for (int q = 0; q < R; ++q) {  // this node: the direct header and signal
      const int d = h.rank_at[h.node * R + q];
      int32_t* header = reinterpret_cast<int32_t*>(device::node_ptr(w, d) + dispatch_in(lay, W, parity, p.rank));
      if (threadIdx.x == 0) header[kHeaderTokens] = bad ? 0 : p.send_token_count[d];
      for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
        header[kHeaderCounts + e] = bad ? 0 : p.send_expert_count[e];
      __syncthreads();
      if (threadIdx.x == 0) dev::signal(w, d, kSigDispatchData, 1);
    }
    for (int n = 0; n < h.num_nodes; ++n) {  // other nodes: the forward box to the same local index
      if (n == h.node) continue;
      int32_t* header = reinterpret_cast<int32_t*>(forward_box(h, parity, n));
      const int records = bad ? 0 : h.fwd_count[n];
      if (threadIdx.x < R) header[kFwdHeaderTokens + threadIdx.x] = bad ? 0 : p.send_token_count[h.rank_at[n * R + threadIdx.x]];
      if (threadIdx.x == 0) header[kFwdHeaderRecords] = records;
      for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
        header[kFwdHeaderCounts + e] = bad ? 0 : p.send_expert_count[e];
      if (dev::direct_ptr(w, peer_in_node(h, n)) != nullptr) {  // stored in place (NOTE [EP hierarchical mapped boxes])
        __syncthreads();  // the header, then the signal (the records: before every block's arrival)
        if (threadIdx.x == 0) dev::signal(w, peer_in_node(h, n), kSigForwardData, 1);
      } else {
        dev::put_with_signal(w, peer_in_node(h, n), fwd_in(h, parity, h.node), fwd_out(h, parity, n),
                             h.hl.fwd_header_bytes + size_t(records) * h.hl.fwd_record_bytes, kSigForwardData, 1,
                             dev::SourceIn::kSendView);
      }
    }
  }
  advance_epoch(p, kDispatchSend, epoch);
}

// At the forwarder: every forward record into the inbox slot of each local
// rank in its mask, as its source would have written it.
__global__ void __launch_bounds__(kThreads, 1) hier_forward_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchRecv);  // the receive kernel after this one advances it
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, K = p.topk, Le = p.local_experts, N = h.num_nodes, R = h.per_node;
  const unsigned this_node = node_ranks(h), peers = remote_peers(h);
  const bool got = wait_ranks(h, peers, kSigForwardData, epoch, kPhaseEpDispatch);
  // NOTE [EP hierarchical reuse] (2): the inbox slots of this parity were read in call epoch - 2.
  const bool writable = wait_ranks(h, this_node, kSigDispatchConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpDispatch);
  const bool ok = got && writable;
  __shared__ int32_t records[kMaxRanks];
  __shared__ int32_t max_records;
  auto box = [&](int n) {
    return reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, peer_in_node(h, n))) + fwd_in(h, parity, n);
  };
  if (threadIdx.x < kMaxRanks) {
    const int n = threadIdx.x;
    records[n] = ok && n < N && n != h.node ? reinterpret_cast<const volatile int32_t*>(box(n))[kFwdHeaderRecords] : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int most = 0;
    for (int n = 0; n < N; ++n) most = max(most, records[n]);
    max_records = most;
  }
  __syncthreads();
  if (ok) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __shared__ uint8_t* warp_rows[kWarps][kMaxRanks];
    const int elem = p.fp8_out ? 1 : 2;
    const ItemCursor cursor{N, max_records, p.num_chunks};
    const ItemLoop loop(p);
    for (int item = loop.first; item < cursor.total(); item += loop.stride) {
      int n, i, c;
      if (!cursor.decode(item, records, n, i, c)) continue;
      const int s = peer_in_node(h, n);
      const uint8_t* record = box(n) + h.hl.fwd_record_bytes * size_t(i) + h.hl.fwd_header_bytes;
      const volatile int32_t* prefix = reinterpret_cast<const volatile int32_t*>(record);
      const volatile int32_t* meta = prefix + kFwdPrefixWords;
      const unsigned mask = static_cast<unsigned>(prefix[kFwdMask]);
      const int my_slot = lane < R ? prefix[kFwdSlots + lane] : -1;
      if (c == 0 && lane < kFwdPrefixWords)
        h.fwd_records[(size_t(n) * p.max_tokens + i) * kFwdPrefixWords + lane] = prefix[lane];
      const int expert = lane < K ? meta[1 + lane] : -1;
      int num_rows = 0;
      for (unsigned m = mask; m != 0; m &= m - 1) {
        const int q = __ffs(m) - 1;
        const int d = h.rank_at[h.node * R + q];
        const int slot = __shfl_sync(0xffffffffu, my_slot, q);
        uint8_t* out = reinterpret_cast<uint8_t*>(device::node_ptr(w, d)) + dispatch_in(lay, W, parity, s) + lay.header_bytes +
                       size_t(slot) * lay.record_bytes;
        if (c == 0) {
          int32_t* out_meta = reinterpret_cast<int32_t*>(out);
          if (lane == 0) out_meta[0] = meta[0];
          if (lane < K) {
            out_meta[1 + lane] = expert >= 0 && expert / Le == d ? expert % Le : -1;
            out_meta[1 + K + lane] = meta[1 + K + lane];
            out_meta[1 + 2 * K + lane] = meta[1 + 2 * K + lane];  // the weight's bits
          }
        }
        if (lane == 0) warp_rows[warp][num_rows] = out;
        ++num_rows;
      }
      __syncwarp();
      const uint8_t* src = record + sizeof(int32_t) * kFwdPrefixWords;  // the dispatch record
      const int begin = chunk_begin(p, c), end = chunk_end(p, c);
      // Rows (and scales) at the same offsets inside both records.
      copy_units_to_rows<kRecvUnroll, true>(src + lay.row_offset + size_t(begin) * elem, warp_rows[warp], num_rows,
                                            lay.row_offset + size_t(begin) * elem, (end - begin) * elem / 16, lane);
      if (p.fp8_out) {
        const volatile float* scales = reinterpret_cast<const volatile float*>(src + lay.scales_offset);
        for (int j = 0; j < num_rows; ++j) {
          float* out_scales = reinterpret_cast<float*>(warp_rows[warp][j] + lay.scales_offset);
          for (int g = begin / kScaleBlock + lane; g < end / kScaleBlock; g += 32) out_scales[g] = scales[g];
        }
      }
      __syncwarp();
    }
  }
  if (!arrive_last_forward(h, 0)) return;
  if (ok) {
    for (int n = 0; n < N; ++n) {
      if (n == h.node) continue;
      const int s = peer_in_node(h, n);
      const volatile int32_t* from = reinterpret_cast<const volatile int32_t*>(box(n));
      for (int q = 0; q < R; ++q) {
        int32_t* header =
            reinterpret_cast<int32_t*>(device::node_ptr(w, h.rank_at[h.node * R + q]) + dispatch_in(lay, W, parity, s));
        if (threadIdx.x == 0) header[kHeaderTokens] = from[kFwdHeaderTokens + q];
        for (int e = threadIdx.x; e < p.num_experts; e += blockDim.x)
          header[kHeaderCounts + e] = from[kFwdHeaderCounts + e];
      }
      if (threadIdx.x == 0) h.fwd_record_count[n] = records[n];
      __syncthreads();
      if (threadIdx.x < R) dev::signal(w, h.rank_at[h.node * R + threadIdx.x], kSigForwarded + n, 1);
      // NOTE [EP hierarchical reuse] (1): the forward box is read.
      if (threadIdx.x == 0) dev::signal(w, s, kSigDispatchConsumed, 1);
    }
  }
  reset_forward(h, 0);
}

// The direct receive kernel (internode_dispatch.cu) with the inboxes of sources of
// other nodes filled by their forwarders: waits for kSigForwarded from them,
// reads every inbox from the device window, signals consumed to this node.
__global__ void __launch_bounds__(kThreads, 1) hier_dispatch_recv_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kDispatchRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  if (threadIdx.x < W) {
    const int s = threadIdx.x;
    const bool waited = h.node_of[s] == h.node
                            ? dev::wait_signal(w, s, kSigDispatchData, epoch, kPhaseEpDispatch)
                            : dev::wait_signal(w, forwarder_of(h, s), kSigForwarded + h.node_of[s], epoch,
                                               kPhaseEpDispatch);
    if (!waited) failed = 1;
  }
  __syncthreads();
  const bool ok = *static_cast<volatile int*>(&failed) == 0;
  if (ok)
    place_dispatch_records</*kPipelined=*/false>(np, [&](int s) { return w.local + dispatch_in(lay, W, parity, s); },
                                                 epoch, /*host_inboxes=*/false);
  if (!arrive_last<true>(p, kDispatchRecv)) return;
  // NOTE [EP hierarchical reuse] (2): this node's ranks wrote every inbox.
  if (ok && threadIdx.x < h.per_node) dev::signal(w, h.rank_at[h.node * h.per_node + threadIdx.x], kSigDispatchConsumed, 1);
  advance_epoch(p, kDispatchRecv, epoch);
}


}  // namespace

void load_hier_dispatch_kernels() {
  load_kernels(hier_forward_index_kernel, hier_dispatch_send_kernel<true>, hier_dispatch_send_kernel<false>,
               hier_forward_kernel, hier_dispatch_recv_kernel);
}

void launch_hier_dispatch_send(const HierParams& h, cudaStream_t stream) {
  hier_forward_index_kernel<<<1, kIndexThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
  const auto kernel =
      h.np.p.fp8_out && !h.np.p.fp8_in ? hier_dispatch_send_kernel<true> : hier_dispatch_send_kernel<false>;
  kernel<<<h.np.p.num_blocks, kThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_hier_dispatch_recv(const HierParams& h, cudaStream_t stream) {
  hier_forward_kernel<<<h.np.p.num_blocks, kThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
  const size_t smem = net_dispatch_recv_smem_bytes(h.np.p.world_size, h.np.p.local_experts, h.np.p.num_experts);
  hier_dispatch_recv_kernel<<<h.np.p.num_blocks, kThreads, smem, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
