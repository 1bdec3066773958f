// The device channel layer: how a kernel reaches the other ranks of its group.
// Every library kernel (AllReduce, EP inside a node, EP and AllReduce across
// nodes) and user kernels on a ferry::Window go through this header and nothing else.
// - Peers of the node (NVLink, CUDA IPC mappings of a symmetric buffer): a
//   region as every node peer maps it (NodeRegion::at) for loads and stores
//   straight into the peer's memory, and flag rows (NodeFlags, NOTE [Flag rows])
//   to publish and wait. What the intranode AllReduce and EP kernels take.
// - Any peer, through a window (ferry::Window, include/ferry/window.hpp): put,
//   put_with_signal, signal, wait_signal, quiet. The same call reaches a peer in
//   the node over NVLink (node_ptr: stores into its memory) and a peer in
//   another node through the proxy (a descriptor in the FIFO; the proxy drives
//   UCX). Nothing here names the proxy: a proxy-less backend (UCX's device API,
//   NVSHMEM IBGDA) would fill DeviceWindow's network part differently and keep
//   these signatures. The cross-node kernels use the window for every peer,
//   and node_ptr to store straight into the peers of their node.
// NOTE [Channel peers]: kernels never index a table of peer pointers
// themselves (NodeRegion::at, node_ptr, direct_ptr and recv_ptr do), so how a
// peer is reached (an IPC mapping, a mapped host landing buffer, the proxy)
// stays in this header and the host code that fills it.
//
// NOTE [Window signals]
// Every rank's window has num_signals signal words per source rank: word
// (source, index) is only ever added to by `source`, and only grows, so a wait
// is `word >= expected`. Words written over NVLink live in device memory
// (nvl_signals: release adds); words written by the network live in pinned
// host memory mapped into the GPU (net_signals: the source's proxy puts the
// word's new total, NOTE [Network signals] in src/net/proxy.cpp). wait_signal
// picks the word from the peer's kind, so kernels never look at it.
//
// NOTE [Mapped peers]
// A peer of another node whose landing buffer UCX can map into this process
// (its shared-memory transports on one host: ucp_rkey_ptr of a region UCX
// allocated) gets its put data stored straight into that buffer by the
// kernel's threads, in host memory registered with CUDA on both sides: one copy
// instead of three (host mirror, the proxy's UCX copy, none of the landing).
// Its signals go through the proxy (unless its signal words are mapped too,
// NOTE [Mapped signals]), one descriptor after a system fence:
// the data is in host memory before the proxy reads the descriptor, and the
// proxy's put of the signal's total keeps NOTE [Network signals] as it is (one
// writer per word, totals in order). The receiver is unchanged: it reads the
// landing buffer (recv_ptr) after the signal, as for any proxied put.
//
// NOTE [Mapped signals]
// Over the same transports a peer's network signal words are UCX memory too,
// mapped here (map_peer_signals). A kernel that is the only writer of signal
// word (this rank, index) at such a peer, in stream order, and knows the word's
// running total may store the total itself (store_signal_total): no descriptor,
// no proxy hop. Its block's data stores come first (a block barrier, then the
// storing thread's system fence: the word is never seen before the data). Such
// a word must never also be signalled through the proxy, which keeps its own
// totals (NOTE [Network signals]). The receiver waits as for any signal.
//
// NOTE [Window data]
// put copies `bytes` from this rank's window at src_offset to the peer's window
// at dst_offset. The receiver reads what a peer put through recv_ptr(peer):
// its device window for a peer in the node, and for a peer in another node the
// memory the network wrote: the device window when UCX moves CUDA memory (RDMA
// with GPUDirect), else a pinned host landing buffer mapped into the
// GPU. So the same kernel is right on both (NOTE [Window staging], window.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/device/fifo.cuh"
#ifdef __CUDACC__
#include "ferry/device/sync.cuh"
#endif
#include "ferry/device/timeout.cuh"

#ifdef __CUDACC__
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD inline
#endif

namespace ferry::device {


// Ranks one NVLink node holds (an 8-GPU node): the size of every peer table.
constexpr int kMaxNodeRanks = 8;

// A symmetric region (one buffer, or a typed part of it) as the peers of the
// node map it here, by each rank's index in the kernel's group (its local rank
// for node-local kernels): at(peer) is where this rank's loads and stores reach
// `peer`'s copy over NVLink, at(rank) its own. Value-initialized ({}): every
// entry nullptr. Filled on the host by node_region() (src/memory/node_region.hpp).
template <typename T>
class NodeRegion {
 public:
  FERRY_HD T* at(int peer) const { return ptr_[peer]; }
  FERRY_HD void set(int peer, T* ptr) { ptr_[peer] = ptr; }

 private:
  T* ptr_[kMaxNodeRanks];
};

// NOTE [Flag rows]
// A flag region is an array of uint64 words in every rank's memory, mapped into
// every peer. Flags only grow (epochs, counters), so waits are `flag >= value`
// and no flag is ever reset. Collective exchanges use rows: a row is
// kMaxNodeRanks consecutive words where word `source` is written only by rank
// `source`. A writer publishes data by: its data stores -> __syncthreads() ->
// block_signal_row (release stores at system scope); a reader: block_wait_row
// (acquire spins, then __syncthreads()) -> loads of the data.
struct NodeFlags {
  NodeRegion<uint64_t> region;  // every rank's flag region
  int32_t rank;               // this rank's index in the group
  int32_t world_size;

#ifdef __CUDACC__
  // Release-stores `value` into word `slot` of peer's region.
  __device__ __forceinline__ void signal(int peer, size_t slot, uint64_t value) const {
    st_release_sys(region.at(peer) + slot, value);
  }
  // Release-adds `value` to word `slot` of peer's region.
  __device__ __forceinline__ void signal_add(int peer, size_t slot, uint64_t value) const {
    signal_add_release_sys(region.at(peer) + slot, value);
  }
  // Spins (timeout primitive) until word `slot` of this rank's region reaches
  // `expected`; `peer` and `phase` only name the wait in a timeout report.
  __device__ __forceinline__ bool wait(size_t slot, uint64_t expected, const WaitContext& ctx, int peer,
                                       int32_t phase) const {
    return wait_flag_geq(region.at(rank) + slot, expected, ctx, peer, phase);
  }
  // Word `slot` of this rank's region, as a pointer (for warp-level waits).
  __device__ __forceinline__ uint64_t* local(size_t slot) const { return region.at(rank) + slot; }

  // Block scope: thread t < world_size release-stores `value` into word
  // row + rank of rank t (itself only with include_self). The caller orders the
  // block's data stores first (__syncthreads()).
  __device__ __forceinline__ void block_signal_row(size_t row, uint64_t value, bool include_self) const {
    const int peer = static_cast<int>(threadIdx.x);
    if (peer < world_size && (include_self || peer != rank)) signal(peer, row + rank, value);
  }
  // Block scope: thread t < world_size waits until word row + t of this rank
  // reaches `expected` (its own only with include_self), then __syncthreads().
  // A failed wait sets *failed_shared (block shared memory, zeroed by the
  // caller); returns false for the whole block once it is set, then and after.
  __device__ __forceinline__ bool block_wait_row(size_t row, uint64_t expected, const WaitContext& ctx,
                                                 int32_t phase, bool include_self, int* failed_shared) const {
    const int peer = static_cast<int>(threadIdx.x);
    if (peer < world_size && (include_self || peer != rank)) {
      if (!wait(row + peer, expected, ctx, peer, phase)) *failed_shared = 1;
    }
    __syncthreads();
    return *static_cast<volatile int*>(failed_shared) == 0;
  }
  // Block scope: thread 0 waits for one word (from one peer), then __syncthreads().
  __device__ __forceinline__ bool block_wait_one(size_t slot, uint64_t expected, const WaitContext& ctx, int peer,
                                                 int32_t phase, int* failed_shared) const {
    if (threadIdx.x == 0 && !wait(slot, expected, ctx, peer, phase)) *failed_shared = 1;
    __syncthreads();
    return *static_cast<volatile int*>(failed_shared) == 0;
  }
#endif  // __CUDACC__
};

}  // namespace ferry::device

#undef FERRY_HD

namespace ferry {

// A window as its kernels see it. Built by ferry::Window::device(); passed by
// value (it holds pointers to per-peer tables in device memory).
struct DeviceWindow {
  char* local;                     // this rank's window (device memory), `bytes` long
  char* net_recv;                  // where peers of other nodes' puts land (== local, or a mapped host buffer)
  char* net_send;                  // staged: mapped host mirror put sources are copied into first; nullptr:
                                   // the transport reads local itself (NOTE [Window staging], window.cpp)
  uint64_t* nvl_signals;           // [world][num_signals], device memory: written over NVLink
  uint64_t* net_signals;           // [world][num_signals], written by the network (mapped host memory)
  char* const* nvl_peer;           // [world]: a peer's window mapped here over NVLink; nullptr: another node
                                   // (kernels read it through node_ptr, NOTE [Channel peers])
  char* const* map_peer;           // [world]: a peer's landing buffer mapped here (NOTE [Mapped peers]); the
                                   // table or an entry nullptr: puts to that peer go through the proxy
  uint64_t* const* nvl_peer_signals;  // [world]: a peer's nvl_signals mapped here; nullptr: another node
  uint64_t* const* map_peer_signals;  // [world]: a peer's net_signals mapped here (NOTE [Mapped signals]); the
                                      // table or an entry nullptr: signals to that peer go through the proxy
  FifoHandle fifo;                 // the proxy FIFO (unused when every peer is in the node)
  uint64_t bytes;
  uint32_t window_id;
  int32_t num_signals;
  int32_t rank;
  int32_t world_size;
  WaitContext wait;
};

#ifdef __CUDACC__
namespace device {

// The window of `peer` as mapped here over NVLink; nullptr: another node.
__device__ __forceinline__ char* node_ptr(const DeviceWindow& w, int peer) { return w.nvl_peer[peer]; }

__device__ __forceinline__ bool is_nvlink_peer(const DeviceWindow& w, int peer) {
  return node_ptr(w, peer) != nullptr;
}

// `peer`'s landing buffer mapped here (NOTE [Mapped peers]); nullptr: puts to
// that peer go through the proxy (or it is a peer of the node: node_ptr).
__device__ __forceinline__ char* mapped_ptr(const DeviceWindow& w, int peer) {
  return w.map_peer != nullptr ? w.map_peer[peer] : nullptr;
}
__device__ __forceinline__ bool is_mapped_peer(const DeviceWindow& w, int peer) {
  return w.map_peer != nullptr && w.map_peer[peer] != nullptr;
}

// `peer`'s network signal words mapped here (NOTE [Mapped signals]); nullptr: not mapped.
__device__ __forceinline__ uint64_t* mapped_signals(const DeviceWindow& w, int peer) {
  return w.map_peer_signals != nullptr ? w.map_peer_signals[peer] : nullptr;
}

// Where this rank's kernels may store straight into `peer`'s side: its window
// over NVLink, or its landing buffer mapped in host memory (NOTE [Mapped
// peers]: then the signal still goes through the proxy); nullptr: only puts.
// A store at offset o here is what a put to dst_offset o delivers.
__device__ __forceinline__ char* direct_ptr(const DeviceWindow& w, int peer) {
  if (node_ptr(w, peer) != nullptr) return node_ptr(w, peer);
  return mapped_ptr(w, peer);
}

// Where the data `peer` put into this rank's window is read (NOTE [Window data]).
__device__ __forceinline__ const char* recv_ptr(const DeviceWindow& w, int peer) {
  return is_nvlink_peer(w, peer) ? w.local : w.net_recv;
}

// Where a kernel may build data it will put to peers of other nodes: the
// window's send view, the pinned host mirror when the network does not read GPU
// memory (NOTE [Window staging], window.cpp), else the window itself. Data
// written here goes out with a put whose `source` is SourceIn::kSendView, which
// skips the group's copy: the kernel's own stores (from all its blocks) are the
// staging, in parallel, where a group's copy would be one block's.
__device__ __forceinline__ char* send_view(const DeviceWindow& w) {
  return w.net_send != nullptr ? w.net_send : w.local;
}

// Copies [src, src + bytes) to dst with the threads [rank, rank + count) of a
// group: 16-byte units where both are aligned, bytes otherwise.
__device__ __forceinline__ void group_copy(char* dst, const char* src, size_t bytes, unsigned rank,
                                           unsigned count) {
  const bool aligned = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15u) == 0;
  size_t done = 0;
  if (aligned) {
    const size_t units = bytes / 16;
    for (size_t i = rank; i < units; i += count)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    done = units * 16;
  }
  for (size_t i = done + rank; i < bytes; i += count) dst[i] = src[i];
}

__device__ __forceinline__ uint64_t* signal_word(uint64_t* base, const DeviceWindow& w, int source, uint32_t index) {
  return base + static_cast<size_t>(source) * w.num_signals + index;
}

// One thread: adds `value` to signal word `index` of this rank at `peer`, after
// every store this thread made before (and, through the caller's
// __syncthreads/__syncwarp, its group's). Returns false if the FIFO wait failed.
__device__ __forceinline__ bool signal(const DeviceWindow& w, int peer, uint32_t index, uint64_t value) {
  if (is_nvlink_peer(w, peer)) {
    signal_add_release_sys(signal_word(w.nvl_peer_signals[peer], w, w.rank, index), value);
    return true;
  }
  __threadfence_system();  // the data before the descriptor the proxy reads
  return fifo_push(w.fifo, make_fifo_entry(FifoOp::kSignal, w.window_id, peer, 0, 0, 0, index, value), w.wait) !=
         ~0ull;
}

// One thread: sets signal word `index` of this rank at `peer` (its signal words
// mapped here, mapped_signals) to `total`, after every store this thread made
// before and, through the caller's barrier, its group's (NOTE [Mapped signals]).
__device__ __forceinline__ void store_signal_total(const DeviceWindow& w, int peer, uint32_t index, uint64_t total) {
  __threadfence_system();
  st_relaxed_sys(signal_word(w.map_peer_signals[peer], w, w.rank, index), total);
}

// Group scope (the threads [rank, rank + count) of a warp or block, all calling
// with the same arguments): copies bytes from this rank's window at src_offset
// to `peer`'s window at dst_offset; with with_signal, then adds signal_value to
// signal word signal_index of this rank at the peer, never before the data.
// Starts with a group barrier (`sync`), so the group's stores to the source
// before the call are included. NVLink: the group's stores, a barrier, one
// release add. Proxy: one descriptor from the group's first thread, after
// the group copied the source into the window's host mirror where the network
// does not read GPU memory (NOTE [Window staging], window.cpp). A put
// without signal followed by a separate signal() needs the group barrier in
// between (the signal orders only the calling thread's stores).
enum class SourceIn { kWindow, kSendView };  // where a put's source was written (send_view)

template <typename Sync>
__device__ __forceinline__ bool put_group(const DeviceWindow& w, int peer, size_t dst_offset, size_t src_offset,
                                          size_t bytes, bool with_signal, uint32_t signal_index,
                                          uint64_t signal_value, unsigned rank, unsigned count, Sync&& sync,
                                          SourceIn source = SourceIn::kWindow) {
  bool ok = true;
  sync();  // the group's earlier stores to the source range are visible to every copier (and the proxy)
  if (is_nvlink_peer(w, peer)) {
    const char* src = (source == SourceIn::kSendView ? send_view(w) : w.local) + src_offset;
    group_copy(node_ptr(w, peer) + dst_offset, src, bytes, rank, count);
    if (with_signal) {
      sync();
      if (rank == 0) signal_add_release_sys(signal_word(w.nvl_peer_signals[peer], w, w.rank, signal_index),
                                            signal_value);
    }
    return true;
  }
  if (w.map_peer != nullptr && w.map_peer[peer] != nullptr) {  // NOTE [Mapped peers]
    const char* src = (source == SourceIn::kSendView ? send_view(w) : w.local) + src_offset;
    group_copy(w.map_peer[peer] + dst_offset, src, bytes, rank, count);
    __threadfence_system();  // this thread's stores into the peer's landing before the barrier
    if (!with_signal) return true;
    sync();
    if (rank == 0) {
      __threadfence_system();
      ok = fifo_push(w.fifo, make_fifo_entry(FifoOp::kSignal, w.window_id, peer, 0, 0, 0, signal_index, signal_value),
                     w.wait) != ~0ull;
    }
    return ok;
  }
  if (w.net_send != nullptr && source == SourceIn::kWindow) {  // NOTE [Window staging]: into the host mirror
    group_copy(w.net_send + src_offset, w.local + src_offset, bytes, rank, count);
    __threadfence_system();  // this thread's copies before the group barrier and the descriptor
    sync();
  }
  if (rank == 0) {
    __threadfence_system();
    const FifoEntry e = make_fifo_entry(with_signal ? FifoOp::kPutWithSignal : FifoOp::kPut, w.window_id, peer,
                                        dst_offset, src_offset, bytes, signal_index, signal_value);
    ok = fifo_push(w.fifo, e, w.wait) != ~0ull;
  }
  return ok;
}

// Block scope: every thread of the block calls it.
__device__ __forceinline__ bool put(const DeviceWindow& w, int peer, size_t dst_offset, size_t src_offset,
                                    size_t bytes) {
  return put_group(w, peer, dst_offset, src_offset, bytes, false, 0, 0, threadIdx.x, blockDim.x,
                   [] { __syncthreads(); });
}
__device__ __forceinline__ bool put_with_signal(const DeviceWindow& w, int peer, size_t dst_offset,
                                                size_t src_offset, size_t bytes, uint32_t signal_index,
                                                uint64_t signal_value, SourceIn source = SourceIn::kWindow) {
  return put_group(w, peer, dst_offset, src_offset, bytes, true, signal_index, signal_value, threadIdx.x,
                   blockDim.x, [] { __syncthreads(); }, source);
}
// Warp scope: every lane of the warp calls it.
__device__ __forceinline__ bool put_warp(const DeviceWindow& w, int peer, size_t dst_offset, size_t src_offset,
                                         size_t bytes) {
  return put_group(w, peer, dst_offset, src_offset, bytes, false, 0, 0, threadIdx.x & 31u, 32u,
                   [] { __syncwarp(); });
}
__device__ __forceinline__ bool put_with_signal_warp(const DeviceWindow& w, int peer, size_t dst_offset,
                                                     size_t src_offset, size_t bytes, uint32_t signal_index,
                                                     uint64_t signal_value) {
  return put_group(w, peer, dst_offset, src_offset, bytes, true, signal_index, signal_value, threadIdx.x & 31u,
                   32u, [] { __syncwarp(); });
}

// One thread: waits (timeout primitive) until signal word `index` from `peer`
// reaches `expected`. After it returns true, this thread may read what `peer`
// put before the signal (through recv_ptr); share it with __syncthreads().
// `phase` only names the wait in a timeout report (a collective built on this
// API names its own step).
__device__ __forceinline__ bool wait_signal(const DeviceWindow& w, int peer, uint32_t index, uint64_t expected,
                                            int32_t phase = kPhaseSignalWait) {
  uint64_t* base = is_nvlink_peer(w, peer) ? w.nvl_signals : w.net_signals;
  return wait_flag_geq(signal_word(base, w, peer, index), expected, w.wait, peer, phase);
}

// The current value of signal word `index` from `peer` (acquire).
__device__ __forceinline__ uint64_t read_signal(const DeviceWindow& w, int peer, uint32_t index) {
  uint64_t* base = is_nvlink_peer(w, peer) ? w.nvl_signals : w.net_signals;
  return ld_acquire_sys(signal_word(base, w, peer, index));
}

// One thread: returns once every put and signal this rank issued before it is
// complete at its target (NVLink: a system fence; proxy: a flush).
__device__ __forceinline__ bool quiet(const DeviceWindow& w) {
  __threadfence_system();
  if (w.fifo.entries == nullptr) return true;
  return fifo_quiet(w.fifo, w.rank, w.wait);
}

}  // namespace device
#endif  // __CUDACC__

}  // namespace ferry
