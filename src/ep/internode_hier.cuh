// The hierarchical high-throughput EP path across nodes (the default on nodes
// of several ranks; FERRY_EP_HIERARCHICAL=0 turns it off): what its dispatch (internode_hier_dispatch.cu) and
// combine (internode_hier_combine.cu) kernels share. The direct path's kernels
// (internode_dispatch.cu, internode_combine.cu) are not used by it and not changed by it.
//
// NOTE [EP hierarchical]
// Ranks: node n, local index l (equal node sizes R, EpBuffer checks); the rank
// (m, l) is "the forwarder of node m" for every source (n, l), and back.
// Results are those of the direct path (NOTE [EP across nodes]): every
// destination's dispatch inbox slot for a source s ends up holding exactly what
// s would have written there (header + records at the layout kernel's slots),
// so the receive side computes the same rows, counts, offsets and weights.
//  - dispatch send at s = (n, l): the forward-index kernel gives each token its
//    record index in the forward box of every node m != n it goes to (a
//    prefix over tokens: tokens in order). The pack kernel writes each token's
//    record into the inbox of each destination of node n (NVLink, as the direct
//    path) and ONCE per other node m into this rank's forward outbox for m: the
//    prefix (mask of m's local ranks it goes to, its slot at each), the routing
//    record with global experts, the row, the fp8 scales. The last block writes
//    the headers (node n: the direct header + kSigDispatchData; node m: per
//    local rank the token count, the record count, the rows per expert) and
//    puts each forward box with kSigForwardData to (m, l).
//  - forward (dispatch receive, before the receive kernel) at f = (m, l):
//    waits for kSigForwardData from every (n', l), n' != m; per record and
//    local rank q in its mask, writes the direct record (local expert at q or
//    -1) at q's inbox slot for s (NVLink into q's device window, also for
//    q == f) and keeps the prefix (for combine). The last block writes q's
//    header for s, signals q kSigForwarded + n' and the source
//    kSigDispatchConsumed (its forward box is read).
//  - receive at q: as the direct receive kernel, but every inbox is read from
//    the device window, and a source s of another node is waited for on word
//    kSigForwarded + node(s) of its forwarder (node(q), local(s)). It signals
//    kSigDispatchConsumed to the ranks of its node only (they wrote its inboxes).
//  - combine send at q: per received (s, slot, chunk) the weighted partial as the
//    direct path; for a home of q's node into its combine inbox (NVLink); for a
//    home s of another node into the combine-forward inbox [local(q)][node(s)]
//    of f = (node(q), local(s)) at the same slot (NVLink). Last block:
//    kSigCombineData to the homes of its node, kSigCombineForward to every rank
//    of its node.
//  - combine forward (combine receive, before the receive kernel) at f: waits
//    for kSigCombineForward from every rank of its node; per forwarded record i
//    of source node n', adds (fp32) the partials of the local ranks in its mask
//    in local-rank order, writes bf16 at row i of its combine outbox for
//    s = (n', l) and puts it to s's combine inbox [f] with kSigCombineData.
//  - combine receive at s: out[t] = for each node m in order: node n: the
//    partials of its ranks the token went to, in rank order; m != n: the node
//    partial at row fwd_index[t][m] from (m, l). fp32, one fixed order, so the
//    output is deterministic (the direct path sums the same bf16 partials in
//    rank order; here a node's sum is rounded to bf16 once more: within the
//    combine tolerance).
//
// NOTE [EP hierarchical reuse]
// Boxes are [2 parity] by call count, as NOTE [EP across nodes: reuse]; each
// word below grows by one per call of its kind, from one writer.
//  1. Forward outbox (s, m, parity) and forward inbox (f, n, parity): s writes
//     and puts in dispatch n; the proxy reads the outbox asynchronously; f
//     reads the inbox in its forward kernel n, after kSigForwardData n (issued
//     by the proxy after the data), then signals s kSigDispatchConsumed. s's
//     send n waits for that word >= n - 2 from each forwarder: both boxes of
//     parity n & 1 were last used in call n - 2.
//  2. Dispatch inbox (q, s, parity) for s of another node: written by f in its
//     forward n (NVLink), read by q in receive n, which then signals f
//     kSigDispatchConsumed (q signals every rank of its node once per call:
//     this covers f's own direct slot and every slot f forwarded). f's forward
//     n waits for that word >= n - 2 from every rank of its node.
//  3. Combine-forward inbox (f, q, parity): q writes it in combine send m
//     after kSigCombineConsumed >= m - 2 from every rank of its node; f reads
//     it in its forward m, which precedes f's combine receive m on f's stream,
//     whose last block signals q kSigCombineConsumed: so that word covers it.
//  4. Combine outbox (f, s, parity) and combine inbox (s, f, parity): f writes
//     and puts in forward m, after kSigCombineConsumed >= m - 2 from s; s
//     signals it after reading in receive m.
//  5. fwd_index (s, local) is written by dispatch send and read by the
//     combines of that dispatch; fwd_records (f, local) by forward and read by
//     the combines (the call order rules, NOTE [EpBuffer call order]).
// No wait spans two kernels of one rank: the forward kernels wait only for
// other ranks' sends and for consumed words of earlier calls.
#pragma once

#include "ep/internode_common.cuh"

namespace ferry::ep {
namespace {

__device__ __forceinline__ size_t fwd_in(const HierParams& h, int parity, int source_node) {
  return h.hl.fwd_in + (size_t(parity) * h.num_nodes + source_node) * h.hl.fwd_slot;
}
__device__ __forceinline__ size_t fwd_out(const HierParams& h, int parity, int destination_node) {
  return h.hl.fwd_out + (size_t(parity) * h.num_nodes + destination_node) * h.hl.fwd_slot;
}
__device__ __forceinline__ size_t cfwd_in(const HierParams& h, int parity, int local_rank, int source_node) {
  return h.hl.cfwd_in + ((size_t(parity) * h.per_node + local_rank) * h.num_nodes + source_node) * h.hl.cfwd_slot;
}
// The rank with this rank's local index in node m, and the forwarder in this
// node for a rank of another node.
__device__ __forceinline__ int peer_in_node(const HierParams& h, int m) { return h.rank_at[m * h.per_node + h.local]; }
// NOTE [EP hierarchical mapped boxes]
// Where this rank writes its forward box for node n: the forwarder's inbox
// itself where its landing buffer is mapped here (NOTE [Mapped peers]; over
// UCX shared memory), else this rank's outbox in the send view, which a put
// then carries. Stored in place, the box crosses PCIe once; through the host
// mirror and the mapped copy it would cross it twice. The same for the combine
// forward's partials (combine_target). The reuse rules are those of the puts,
// which land later than the stores (NOTE [EP hierarchical reuse], 1 and 4):
// the waits before any store already cover the inbox of this parity.
__device__ __forceinline__ uint8_t* forward_box(const HierParams& h, int parity, int n) {
  if (char* direct = dev::direct_ptr(h.np.w, peer_in_node(h, n)))
    return reinterpret_cast<uint8_t*>(direct) + fwd_in(h, parity, h.node);
  return reinterpret_cast<uint8_t*>(dev::send_view(h.np.w)) + fwd_out(h, parity, n);
}
__device__ __forceinline__ int forwarder_of(const HierParams& h, int rank) {
  return h.rank_at[h.node * h.per_node + h.local_of[rank]];
}

// Block scope: thread i < W waits for word `index` >= target from rank i when
// bit i of `ranks` is set (nothing for target 0); false for the whole block
// when a wait failed.
__device__ bool wait_ranks(const HierParams& h, unsigned ranks, uint32_t index, uint64_t target, int32_t phase) {
  __shared__ int failed;
  __syncthreads();  // every thread has read the previous call's result
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x);
  if (r < h.np.p.world_size && ((ranks >> r) & 1u) && target > 0 &&
      !dev::wait_signal(h.np.w, r, index, target, phase))
    failed = 1;
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
}
// The ranks of this node, and this rank's peers (same local index) of the other nodes.
__device__ __forceinline__ unsigned node_ranks(const HierParams& h) {
  unsigned m = 0;
  for (int q = 0; q < h.per_node; ++q) m |= 1u << h.rank_at[h.node * h.per_node + q];
  return m;
}
__device__ __forceinline__ unsigned remote_peers(const HierParams& h) {
  unsigned m = 0;
  for (int n = 0; n < h.num_nodes; ++n)
    if (n != h.node) m |= 1u << peer_in_node(h, n);
  return m;
}
// Block scope: true in the last block of a forward kernel (slot 0: dispatch, 1: combine).
__device__ bool arrive_last_forward(const HierParams& h, int which) {
  __syncthreads();
  __shared__ int last;
  if (threadIdx.x == 0) {
    __threadfence_system();
    last = atomicAdd(&h.blocks_done[which], 1u) == gridDim.x - 1;
    __threadfence();
  }
  __syncthreads();
  return last != 0;
}
__device__ void reset_forward(const HierParams& h, int which) {
  __syncthreads();
  if (threadIdx.x == 0) {
    h.blocks_done[which] = 0;
    __threadfence();
  }
}

}  // namespace
}  // namespace ferry::ep
