// Hierarchical high-throughput EP combine across nodes (the default; FERRY_EP_HIERARCHICAL=0: direct):
// the send, forward (node partials) and receive kernels. Protocol: NOTE [EP
// hierarchical] and NOTE [EP hierarchical reuse] in internode_hier.cuh.
#include "ep/internode_hier.cuh"

namespace ferry::ep {
namespace {

constexpr int kUnroll = kCombineUnroll;

// A home in this node gets its partials in its combine inbox over NVLink; a
// home of another node gets them through the forwarder of its local index in
// this node (the forwarder's combine-forward inbox).
struct HierTarget {
  const HierParams& h;
  int parity;
  __device__ uint8_t* row(int s, int slot, size_t) {
    const NetParams& np = h.np;
    const int W = np.p.world_size;
    uint8_t* const inbox = h.node_of[s] == h.node
                               ? reinterpret_cast<uint8_t*>(device::node_ptr(np.w, s)) + combine_in(np.lay, W, parity, np.p.rank)
                               : reinterpret_cast<uint8_t*>(device::node_ptr(np.w, forwarder_of(h, s))) +
                                     cfwd_in(h, parity, h.local, h.node_of[s]);
    return inbox + size_t(slot) * (size_t(np.p.hidden) * 2);
  }
  __device__ void written(int, int, int) {}
};

// Partials as the direct combine send (combine_send_items), to HierTarget's rows.
__global__ void __launch_bounds__(kThreads, 1) hier_combine_send_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const uint64_t epoch = current_epoch(p, kCombineSend);
  const int parity = static_cast<int>(epoch & 1);
  const int R = h.per_node;
  __shared__ int32_t token_count[kMaxRanks];
  __shared__ int32_t max_token_count;
  load_recv_counts(p, token_count, max_token_count);
  // NOTE [EP hierarchical reuse] (3): this node's combine inboxes and combine-forward inboxes of this parity.
  const bool ok = wait_ranks(h, node_ranks(h), kSigCombineConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpCombine);
  if (ok) {
    HierTarget target{h, parity};
    combine_send_items(p, token_count, max_token_count, target);
  }
  if (!arrive_last<true>(p, kCombineSend)) return;
  if (ok && threadIdx.x < R) {
    const int d = h.rank_at[h.node * R + threadIdx.x];
    dev::signal(w, d, kSigCombineData, 1);     // its own tokens' partials
    dev::signal(w, d, kSigCombineForward, 1);  // the partials it forwards
  }
  advance_epoch(p, kCombineSend, epoch);
}

// At the forwarder: per forwarded token, the sum of its node's partials in
// local-rank order, put to the token's home (one put per home).
__global__ void __launch_bounds__(kThreads, 1) hier_combine_forward_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineRecv);  // the receive kernel after this one advances it
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, N = h.num_nodes, R = h.per_node;
  const size_t row_bytes = size_t(p.hidden) * 2;
  const bool got = wait_ranks(h, node_ranks(h), kSigCombineForward, epoch, kPhaseEpCombine);
  // NOTE [EP hierarchical reuse] (4): the outbox and the home's inbox of this parity.
  const bool writable = wait_ranks(h, remote_peers(h), kSigCombineConsumed, epoch > 2 ? epoch - 2 : 0, kPhaseEpCombine);
  const bool ok = got && writable;
  __shared__ int32_t records[kMaxRanks];
  __shared__ int32_t max_records;
  if (threadIdx.x < kMaxRanks) {
    const int n = threadIdx.x;
    records[n] = ok && n < N && n != h.node ? h.fwd_record_count[n] : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int most = 0;
    for (int n = 0; n < N; ++n) most = max(most, records[n]);
    max_records = most;
  }
  __syncthreads();
  if (ok) {
    const int lane = threadIdx.x & 31;
    const ItemCursor cursor{N, max_records, p.num_chunks};
    const ItemLoop loop(p);
    for (int item = loop.first; item < cursor.total(); item += loop.stride) {
      int n, i, c;
      if (!cursor.decode(item, records, n, i, c)) continue;
      const int32_t* prefix = h.fwd_records + (size_t(n) * p.max_tokens + i) * kFwdPrefixWords;
      const unsigned mask = static_cast<unsigned>(prefix[kFwdMask]);
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      const int s = peer_in_node(h, n);
      // NOTE [EP hierarchical mapped boxes]: the home's inbox itself where it is mapped here.
      uint8_t* out = combine_target(np, s, parity) + size_t(i) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (unsigned m = mask; m != 0; m &= m - 1) {  // local-rank order: the same rounding on every call
          const int q = __ffs(m) - 1;
          const uint8_t* partial = reinterpret_cast<const uint8_t*>(w.local) + cfwd_in(h, parity, q, n) +
                                   size_t(prefix[kFwdSlots + q]) * row_bytes + offset;
          accumulate_units<true>(acc, partial, 1.f, base, chunk_units, lane);
        }
        store_units(out, acc, base, chunk_units, lane);
      }
    }
  }
  if (!arrive_last_forward(h, 1)) return;
  if (ok) {
    for (int n = 0; n < N; ++n) {
      if (n == h.node) continue;
      const int s = peer_in_node(h, n);
      const size_t bytes = size_t(records[n]) * row_bytes;
      if (bytes == 0 || dev::direct_ptr(w, s) != nullptr) {  // nothing to put, or stored in place
        __syncthreads();
        if (threadIdx.x == 0) dev::signal(w, s, kSigCombineData, 1);
      } else {
        dev::put_with_signal(w, s, combine_in(lay, W, parity, p.rank), combine_out(lay, W, parity, s), bytes,
                             kSigCombineData, 1, dev::SourceIn::kSendView);
      }
    }
  }
  (void)R;
  reset_forward(h, 1);
}

// out[t] = over the nodes in order: this node's partials in rank order, another
// node's partial from its forwarder.
__global__ void __launch_bounds__(kThreads, 1) hier_combine_recv_kernel(HierParams h) {
  const NetParams& np = h.np;
  const Params& p = np.p;
  const DeviceWindow& w = np.w;
  const NetLayout& lay = np.lay;
  const uint64_t epoch = current_epoch(p, kCombineRecv);
  const int parity = static_cast<int>(epoch & 1);
  const int W = p.world_size, H = p.hidden, N = h.num_nodes, R = h.per_node;
  const int lane = threadIdx.x & 31;
  const size_t row_bytes = size_t(H) * 2;
  const unsigned expected = node_ranks(h) | remote_peers(h);
  const bool ok = wait_ranks(h, expected, kSigCombineData, epoch, kPhaseEpCombine);
  if (ok && *reinterpret_cast<const volatile int32_t*>(p.layout_error) == 0) {
    const int items = p.num_tokens * p.num_chunks;
    const ItemLoop loop(p);
    for (int item = loop.first; item < items; item += loop.stride) {
      const int t = item / p.num_chunks, c = item % p.num_chunks;
      const size_t offset = size_t(chunk_begin(p, c)) * 2;
      const int chunk_units = (chunk_end(p, c) - chunk_begin(p, c)) * 2 / 16;
      // Lane r < W: rank r's partial (this node); lane W + n: node n's partial (another node).
      const uint8_t* partial = nullptr;
      if (lane < W) {
        const int slot = p.token_slot[size_t(t) * W + lane];
        if (slot >= 0 && h.node_of[lane] == h.node)
          partial = reinterpret_cast<const uint8_t*>(w.local) + combine_in(lay, W, parity, lane) +
                    size_t(slot) * row_bytes + offset;
      } else if (lane < W + N && lane - W != h.node) {
        const int n = lane - W, f = peer_in_node(h, n);
        const int i = h.fwd_index[size_t(t) * N + n];
        if (i >= 0)
          partial = reinterpret_cast<const uint8_t*>(dev::recv_ptr(w, f)) + combine_in(lay, W, parity, f) +
                    size_t(i) * row_bytes + offset;
      }
      const unsigned present = __ballot_sync(0xffffffffu, partial != nullptr);
      uint8_t* out = static_cast<uint8_t*>(p.combine_out) + size_t(t) * row_bytes + offset;
      for (int base = 0; base < chunk_units; base += 32 * kUnroll) {
        float acc[kUnroll][8] = {};
        for (int n = 0; n < N; ++n) {  // node order, then rank order inside this node
          const int count = n == h.node ? R : 1;
          for (int j = 0; j < count; ++j) {
            const int from = n == h.node ? h.rank_at[n * R + j] : W + n;
            if (!((present >> from) & 1u)) continue;
            const uint8_t* src = reinterpret_cast<const uint8_t*>(
                __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(partial), from));
            accumulate_units<true>(acc, src, 1.f, base, chunk_units, lane);
          }
        }
        store_units(out, acc, base, chunk_units, lane);
      }
    }
  }
  if (!arrive_last<true>(p, kCombineRecv)) return;
  // NOTE [EP hierarchical reuse] (3, 4): this node's partials and the node partials are read.
  if (ok && threadIdx.x < W && ((expected >> threadIdx.x) & 1u))
    dev::signal(w, static_cast<int>(threadIdx.x), kSigCombineConsumed, 1);
  advance_epoch(p, kCombineRecv, epoch);
}

}  // namespace

void load_hier_dispatch_kernels();  // internode_hier_dispatch.cu

void load_hier_kernels() {
  load_hier_dispatch_kernels();
  load_layout_kernel();
  load_kernels(hier_combine_send_kernel, hier_combine_forward_kernel, hier_combine_recv_kernel);
}

void launch_hier_combine_send(const HierParams& h, cudaStream_t stream) {
  hier_combine_send_kernel<<<h.np.p.num_blocks, kThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

void launch_hier_combine_recv(const HierParams& h, cudaStream_t stream) {
  hier_combine_forward_kernel<<<h.np.p.num_blocks, kThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
  hier_combine_recv_kernel<<<h.np.p.num_blocks, kThreads, 0, stream>>>(h);
  FERRY_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ferry::ep
