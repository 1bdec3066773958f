// Hierarchical AllReduce, for ranks in several nodes (N nodes of L ranks):
// reduce-scatter inside the node (NVLink), allreduce of the shard across nodes
// (through the window's proxy path), all-gather inside the node (NVLink).
//
// The packs are cut into L shards; rank (node n, local index l) owns shard l.
// Block b handles chunk b of every shard, independently of the other blocks
// (no grid-wide barrier; block b of a rank only waits on blocks b of others):
//   A. copy chunk b of every other shard of the input into its window's input
//      area; signal the local peers; wait for theirs; reduce chunk b of shard l
//      over the L local ranks (their input areas, read over NVLink), in local
//      order, into the partial area (rounded to T: the node partial).
//   B. put the partial chunk, with a signal, to rank (n', l) of every other node
//      n', into its landing slot for node n; wait for the signals of every
//      (n', l); reduce the N node partials in node order (the same on every
//      rank, so every rank gets the same bits), apply the op's final step (avg:
//      divide by the world size, once), write the full area and the output.
//   C. signal the local peers; wait for theirs; copy their full chunk b into
//      the output.
// With L = 1, A and C reduce to nothing: the partial is the input.
#include "allreduce/hierarchical.hpp"
#include "allreduce/allreduce_device.cuh"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"

namespace ferry::allreduce {

namespace {

constexpr int kThreads = 512;
// Chunks are whole 128-byte lines: blocks never share a cache line of any area.
constexpr size_t kChunkAlignPacks = 8;
// Packs each thread reduces at once in B (NOTE [Hierarchical read depth]).
constexpr int kReadDepth = 4;

// NOTE [Hierarchical AllReduce reuse]
// Every rank makes the same calls, so launch e (1, 2, ... on this AllReduce:
// the device-side epoch, NOTE [AllReduce epoch]) has the same count and the
// same grid on every rank. Its parity (e & 1) picks the double-buffered areas.
// Signals: block b of a launch adds 1 to each signal word (phase, b) it uses:
// (A, b) and (C, b) to each local peer, (B, b) to (n', l) of every other node,
// also with an empty chunk. The grid varies with the size (hierarchical_blocks),
// so word (phase, b) counts the launches that ran block b: k_b, which every
// rank keeps on the device (block_launches[b], read at the block's start and
// written by the block at its end). A wait of block b is `word >= k_b + 1`
// (a word only grows: NOTE [Window signals]); so is ours.
// Launches of one rank are ordered on its stream: launch e+1 starts after every
// block of launch e ended. Every read below happens before the reader's next
// signal, and every launch has a block 0, which waits like any other.
// Facts used (rank p = (n, l); q a local peer, r = (n', l), n' != n):
//  1. Input area, single buffer. q reads p's input area in A of launch e, in
//     its block b, before sending (C, b) of launch e; p's block b waits for it
//     in launch e. So when p's launch e+1 starts, every read of launch e is
//     done, whatever the grids of e and e+1.
//  2. Full area, single buffer. p's block b writes its chunk of it in B of
//     launch e+1 after waiting for (A, b) of launch e+1 from every q; q sends
//     that in launch e+1, after its whole launch e ended, with every read (C)
//     of p's full area.
//  3. Partial area, double-buffered by launch parity. p writes it in A, then
//     puts from it; the proxy reads the source asynchronously (a staging copy,
//     or the NIC), so the area is busy until r has the data, and p learns that
//     only one launch later. A signal follows its put's data at r (the proxy
//     completes the staged copy, fences, then signals: NOTE [Network signals];
//     a put's source is read before its data lands). In launch e, r's blocks
//     waited for all of p's (B, *) of launch e, so for all of p's puts of e;
//     r sends (B, 0) of launch e+1 only after its launch e ended, and p's block
//     0 waits for it in launch e+1. So when p's launch e+1 has ended, every put
//     of launch e was read at its source: launch e+2, the next of the same
//     parity, may overwrite the area. Launch e+1 may not: it writes before it
//     waits.
//  4. Landing slots, double-buffered by launch parity. p's puts of launch e+2
//     land in r's slot (parity of e, source node n), which r reads in B of
//     launch e. p's launch e+2 starts after its launch e+1 ended, whose block 0
//     waited for r's (B, 0) of launch e+1, sent after r's launch e ended. Launch
//     e+1 lands in the other parity: p knows then only that r started launch
//     e, so one slot would not do. Each source node has its own slot, as the
//     landing buffer of a staged window is shared by all remote sources (NOTE
//     [Window data]).
//  5. Output: block b writes only its chunk of each shard, after its own
//     threads read the input packs there (A, or B for shard l), so in == out
//     is safe.
// NOTE [Hierarchical AllReduce in pieces]
// Where every node peer's landing buffer and signal words are mapped here (UCX
// shared memory: NOTE [Mapped peers], [Mapped signals]; p.pieces > 1, chosen
// alike on every rank), phase B stores data and signals itself, with no proxy.
// A chunk above kWholeChunkBytes is cut into pieces of at least kMinPieceBytes
// (at most p.pieces), and the block's two halves run apart: the first half
// stores piece k into every node peer's landing, then (a named barrier of that
// half, one thread per peer) stores the word's total; the second half waits for
// piece k of every node peer and reduces it. So the GPU's writes to host memory
// and its reads of what landed overlap (the two directions of its PCIe link),
// where one put per block wrote everything, then waited, then read everything.
// A smaller chunk is one piece, written and then read by the whole block (each
// piece costs a signal and a wait of host-memory latency: 8 pieces of 8 KiB lost
// 10-46% at 256 KiB-1 MiB on 2x H100, 16 KiB pieces won 15-21% from 4 MiB;
// session 19 c4 swept 8/16/32 pieces at 32 and 64 blocks: 16 by default).
// Word (B, b) grows by p.pieces per launch that ran block b, whatever the
// chunk: piece k < last of launch k_b + 1 sets k_b * pieces + k + 1, the last
// piece (k_b + 1) * pieces. Block b of this rank is the only writer of its word
// at each peer, in stream order (NOTE [Hierarchical AllReduce reuse]), so the
// total needs no atomic and no proxy. The reuse facts hold as before: a landing
// slot is read only after its piece's word, and the partial area is read by
// this block's own stores before it ends.
constexpr size_t kWholeChunkBytes = size_t{64} << 10;
constexpr size_t kMinPieceBytes = size_t{16} << 10;

template <typename Reduce>
__device__ __forceinline__ bool exchange_in_pieces(const HierarchicalParams& p, const char* partial, size_t landing,
                                                   size_t begin, size_t mine, uint64_t launches, uint32_t sig_b,
                                                   int& failed, Reduce&& reduce_packs) {
  namespace dev = ferry::device;
  const DeviceWindow& w = p.window;
  const int N = p.num_nodes, me_n = p.node;
  const size_t mine_bytes = mine * kPackBytes;
  const size_t by_size = mine_bytes / kMinPieceBytes;
  const int pieces = mine_bytes <= kWholeChunkBytes ? 1
                     : by_size < 2                   ? 2
                                                     : static_cast<int>(min(by_size, static_cast<size_t>(p.pieces)));
  const size_t piece = round_up((mine + pieces - 1) / pieces, kChunkAlignPacks);
  const uint64_t before = (launches - 1) * static_cast<uint64_t>(p.pieces);
  auto total_after = [&](int k) { return k + 1 == pieces ? before + p.pieces : before + k + 1; };
  auto range = [&](int k, size_t& lo, size_t& hi) {
    lo = begin + min(static_cast<size_t>(k) * piece, mine);
    hi = begin + min(static_cast<size_t>(k + 1) * piece, mine);
  };
  // Threads t, t + count, ... of the group store piece k into every node peer's landing.
  auto store_piece = [&](int k, unsigned t, unsigned count) {
    size_t lo, hi;
    range(k, lo, hi);
    for (int m = 0; m < N; ++m) {
      if (m == me_n) continue;
      char* dst = dev::mapped_ptr(w, p.node_peers[m]) + landing + hierarchical_landing_slot(me_n, m) * p.layout.slot_bytes;
      for (size_t j = lo + t; j < hi; j += count) dev::store16(dst + j * kPackBytes, dev::load16(partial + j * kPackBytes));
    }
  };
  auto wait_piece = [&](int k, unsigned t) {
    if (static_cast<int>(t) < N && static_cast<int>(t) != me_n &&
        !dev::wait_signal(w, p.node_peers[t], sig_b, total_after(k), kPhaseHierarchicalInterNode))
      failed = 1;
  };
  auto signal_piece = [&](int k, unsigned t) {
    if (static_cast<int>(t) < N && static_cast<int>(t) != me_n)
      dev::store_signal_total(w, p.node_peers[t], sig_b, total_after(k));
  };
  __syncthreads();  // the partial (phase A) before any thread copies it
  if (pieces == 1) {
    store_piece(0, threadIdx.x, blockDim.x);
    __syncthreads();
    signal_piece(0, threadIdx.x);
    wait_piece(0, threadIdx.x);
    __syncthreads();
    if (*static_cast<volatile int*>(&failed) == 0) reduce_packs(begin, begin + mine, threadIdx.x, blockDim.x);
  } else if (const unsigned half = blockDim.x / 2; threadIdx.x < half) {
    for (int k = 0; k < pieces; ++k) {
      store_piece(k, threadIdx.x, half);
      dev::named_barrier(1, half);
      signal_piece(k, threadIdx.x);
    }
  } else {
    const unsigned t = threadIdx.x - half;
    for (int k = 0; k < pieces; ++k) {
      wait_piece(k, t);
      dev::named_barrier(2, half);
      if (*static_cast<volatile int*>(&failed) != 0) break;
      size_t lo, hi;
      range(k, lo, hi);
      reduce_packs(lo, hi, t, half);
    }
  }
  __syncthreads();
  return *static_cast<volatile int*>(&failed) == 0;
}

template <typename T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) hierarchical_kernel(HierarchicalParams p) {
  namespace dev = ferry::device;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const uint64_t epoch = read_epoch(p.epoch);
  const int parity = static_cast<int>(epoch & 1);
  // Launches that ran this block, this one included: what every signal word (*, b) reaches.
  const uint64_t expected = *reinterpret_cast<const volatile uint64_t*>(p.block_launches + blockIdx.x) + 1;
  const DeviceWindow& w = p.window;
  const HierarchicalLayout& lay = p.layout;
  const int L = p.local_size, N = p.num_nodes, me_l = p.local_rank, me_n = p.node;
  const size_t num_packs = packs_of(p.count, sizeof(T));
  const size_t shard_packs = (num_packs + L - 1) / L;
  const size_t chunk = round_up((shard_packs + gridDim.x - 1) / gridDim.x, kChunkAlignPacks);
  const size_t begin = min(static_cast<size_t>(blockIdx.x) * chunk, shard_packs);
  const size_t end = min(begin + chunk, shard_packs);
  // Chunk b of shard q is [begin, stop(q)): the last shards may be short or empty.
  auto stop = [&](int q) { return min(end, shard_length(q, shard_packs, num_packs)); };
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const uint32_t sig_a = blockIdx.x, sig_b = kHierarchicalMaxBlocks + blockIdx.x,
                 sig_c = 2 * kHierarchicalMaxBlocks + blockIdx.x;
  char* const partial = w.local + lay.partial_offset + parity * lay.slot_bytes;
  // NOTE [Hierarchical AllReduce over mapped peers]
  // A node peer whose landing buffer is mapped here (NOTE [Mapped peers]) gets
  // the partial by this block's own stores, copied from the partial in the
  // window (GPU memory), not from the host mirror: reading the mirror would
  // cross PCIe once more, and writing it once more again (at 64 MB over UCX
  // shared memory that is 128 MB of extra PCIe traffic per rank, on top of the
  // 128 MB the exchange needs). The mirror is written only where some node
  // peer still takes the proxy's puts.
  auto mapped = [&](int peer) { return dev::is_mapped_peer(w, peer); };
  bool proxy_peers = false;
  for (int m = 0; m < N; ++m)
    if (m != me_n && !mapped(p.node_peers[m])) proxy_peers = true;
  // The same partial in the send view when that is the host mirror: the proxy's
  // puts below read it there (NOTE [Window staging]), written by every block at once.
  char* const send_partial = w.net_send != nullptr && proxy_peers
                                 ? w.net_send + lay.partial_offset + parity * lay.slot_bytes
                                 : nullptr;
  const size_t landing = lay.landing_offset + static_cast<size_t>(parity) * (N - 1) * lay.slot_bytes;

  // Thread t < count waits for peers[t]'s word `index` (not itself), then the block.
  auto wait_all = [&](const int32_t* peers, int count, int self, uint32_t index, int32_t phase) {
    const int t = static_cast<int>(threadIdx.x);
    if (t < count && t != self && !dev::wait_signal(w, peers[t], index, expected, phase)) failed = 1;
    __syncthreads();
    return *static_cast<volatile int*>(&failed) == 0;
  };
  // After the block's stores: thread t < L signals local peer t (NVLink release add).
  auto signal_local = [&](uint32_t index) {
    __syncthreads();
    const int t = static_cast<int>(threadIdx.x);
    if (t < L && t != me_l) dev::signal(w, p.local_peers[t], index, 1);
  };

  do {
    // ---- A: reduce-scatter inside the node.
    if (L > 1) {
      for (size_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        uint4 v[kMaxNodeRanks];
#pragma unroll
        for (int q = 0; q < kMaxNodeRanks; ++q)
          if (q < L && q != me_l && j < stop(q)) v[q] = load_user_pack(in, q * shard_packs + j, p.count, p.aligned);
#pragma unroll
        for (int q = 0; q < kMaxNodeRanks; ++q)
          if (q < L && q != me_l && j < stop(q))
            dev::store16(w.local + lay.input_offset + hierarchical_input_slot(q, me_l) * lay.slot_bytes + j * kPackBytes,
                         v[q]);
      }
      signal_local(sig_a);
      if (!wait_all(p.local_peers, L, me_l, sig_a, kPhaseHierarchicalReduceScatter)) break;
    }
    for (size_t j = begin + threadIdx.x; j < stop(me_l); j += blockDim.x) {
      uint4 raw[kMaxNodeRanks];
#pragma unroll
      for (int q = 0; q < kMaxNodeRanks; ++q)
        if (q < L)
          raw[q] = q == me_l ? load_user_pack(in, me_l * shard_packs + j, p.count, p.aligned)
                             : dev::load16(dev::node_ptr(w, p.local_peers[q]) + lay.input_offset +
                                           hierarchical_input_slot(me_l, q) * lay.slot_bytes + j * kPackBytes);
      AccPack<T> acc = unpack<T>(raw[0]);
#pragma unroll
      for (int q = 1; q < kMaxNodeRanks; ++q)
        if (q < L) accumulate<T, Op>(acc, unpack<T>(raw[q]));
      const uint4 packed = pack_partial<T>(acc);
      dev::store16(partial + j * kPackBytes, packed);
      if (send_partial != nullptr) dev::store16(send_partial + j * kPackBytes, packed);
    }

    // ---- B: allreduce of the shard across nodes.
    // Reduces packs [lo, hi) of this block's chunk over the N node partials in
    // node order (threads t = first, first + stride, ...), applies the op's
    // final step, writes the full area (L > 1) and the output.
    // NOTE [Hierarchical read depth]
    // Over a staged window the node partials are read from host memory across
    // PCIe, and a load there takes microseconds: one 16-byte load in flight per
    // thread read ~21 GB/s (2x H100, UCX shared memory, 64 MB). Each thread
    // therefore reduces kReadDepth packs at once, node by node: the kReadDepth
    // loads of one node are all issued before the first is used, and the
    // accumulators (not the raw packs of every node) are what stays in
    // registers. The order of the sum is node order, as before, on every rank.
    auto reduce_packs = [&](size_t lo, size_t hi, unsigned first, unsigned stride) {
      const size_t step = size_t(stride) * kReadDepth;
      for (size_t j0 = lo + first; j0 < hi; j0 += step) {
        AccPack<T> acc[kReadDepth];
        for (int m = 0; m < N; ++m) {
          const char* src = m == me_n ? partial
                                      : dev::recv_ptr(w, p.node_peers[m]) + landing +
                                            hierarchical_landing_slot(m, me_n) * lay.slot_bytes;
          uint4 raw[kReadDepth];
#pragma unroll
          for (int u = 0; u < kReadDepth; ++u) {
            const size_t j = j0 + u * size_t(stride);
            raw[u] = make_uint4(0, 0, 0, 0);
            if (j < hi)
              raw[u] = m == me_n ? dev::load16(src + j * kPackBytes) : dev::load16_volatile(src + j * kPackBytes);
          }
#pragma unroll
          for (int u = 0; u < kReadDepth; ++u) {
            if (m == 0)
              acc[u] = unpack<T>(raw[u]);
            else
              accumulate<T, Op>(acc[u], unpack<T>(raw[u]));
          }
        }
#pragma unroll
        for (int u = 0; u < kReadDepth; ++u) {
          const size_t j = j0 + u * size_t(stride);
          if (j >= hi) break;
          const uint4 result = pack_final<T, Op>(acc[u], p.world_size);
          if (L > 1) dev::store16(w.local + lay.full_offset + j * kPackBytes, result);
          store_user_pack(out, me_l * shard_packs + j, p.count, p.aligned, result);
        }
      }
    };
    const size_t mine = stop(me_l) > begin ? stop(me_l) - begin : 0;
    if (p.pieces > 1) {
      if (!exchange_in_pieces(p, partial, landing, begin, mine, expected, sig_b, failed, reduce_packs)) break;
    } else {
      bool pushed = true;
      for (int m = 0; m < N; ++m) {
        if (m == me_n) continue;
        const int peer = p.node_peers[m];
        if (mine > 0) {
          pushed &= dev::put_with_signal(
              w, peer, landing + hierarchical_landing_slot(me_n, m) * lay.slot_bytes + begin * kPackBytes,
              lay.partial_offset + parity * lay.slot_bytes + begin * kPackBytes, mine * kPackBytes, sig_b, 1,
              mapped(peer) ? dev::SourceIn::kWindow : dev::SourceIn::kSendView);
        } else {  // an empty chunk still counts the launch
          __syncthreads();
          if (threadIdx.x == 0) pushed &= dev::signal(w, peer, sig_b, 1);
        }
      }
      if (!pushed) failed = 1;  // the FIFO wait timed out (thread 0)
      if (!wait_all(p.node_peers, N, me_n, sig_b, kPhaseHierarchicalInterNode)) break;
      reduce_packs(begin, stop(me_l), threadIdx.x, blockDim.x);
    }

    // ---- C: all-gather inside the node.
    if (L > 1) {
      signal_local(sig_c);
      if (!wait_all(p.local_peers, L, me_l, sig_c, kPhaseHierarchicalAllGather)) break;
      for (size_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        uint4 v[kMaxNodeRanks];
#pragma unroll
        for (int q = 0; q < kMaxNodeRanks; ++q)
          if (q < L && q != me_l && j < stop(q))
            v[q] = dev::load16(dev::node_ptr(w, p.local_peers[q]) + lay.full_offset + j * kPackBytes);
#pragma unroll
        for (int q = 0; q < kMaxNodeRanks; ++q)
          if (q < L && q != me_l && j < stop(q)) store_user_pack(out, q * shard_packs + j, p.count, p.aligned, v[q]);
      }
    }
  } while (false);
  __syncthreads();  // every thread has read the count
  if (threadIdx.x == 0) p.block_launches[blockIdx.x] = expected;  // read by the next launch's block b
  finish_epoch(p.epoch);
}

template <typename Fn> void for_each_kernel(DataType type, ReduceOp op, Fn&& fn) {
  dispatch_type_op(type, op, [&](auto type_tag, auto op_tag) {
    fn(hierarchical_kernel<decltype(type_tag), decltype(op_tag)::value>);
  });
}

}  // namespace

void launch_hierarchical(const HierarchicalParams& p, DataType type, ReduceOp op, int max_blocks,
                         cudaStream_t stream) {
  const int blocks =
      hierarchical_blocks(p.count, dtype_size(type), p.local_size, max_blocks, p.pieces > 1, p.block_bytes);
  for_each_kernel(type, op, [&](auto kernel) {
    kernel<<<blocks, kThreads, 0, stream>>>(p);
    FERRY_CUDA_CHECK_LAUNCH();
  });
}

void load_hierarchical_kernels() {
  for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                        DataType::kBFloat16, DataType::kFloat16})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg})
      for_each_kernel(type, op, [](auto kernel) {
        cudaFuncAttributes attributes;
        FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
      });
}

}  // namespace ferry::allreduce
