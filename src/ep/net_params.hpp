// The cross-node EP path (an EpBuffer whose ranks span nodes): what its kernels
// take, the layout of its ferry::Window, and the launch entry points. The
// kernels (net_dispatch.cu, net_combine.cu) move data only through the device API
// (include/ferry/device/channel.cuh): put_with_signal / signal / wait_signal /
// recv_ptr, and stores through DeviceWindow::nvl_peer for peers of the node.
// Protocol: NOTE [EP across nodes] and NOTE [EP across nodes: reuse] in net_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ep/ep_params.hpp"
#include "ferry/device/channel.cuh"

namespace ferry::ep {

// Signal words of the EP window (per source rank; NOTE [Window signals]). Each
// call adds 1 to its word at every peer (itself included), so after the n-th
// call of a kind a word holds n.
enum NetSignal : uint32_t {
  kSigDispatchData = 0,      // source -> destination: its dispatch records are in the inbox
  kSigDispatchConsumed = 1,  // destination -> source: done reading that source's dispatch inbox
  kSigCombineData = 2,       // expert rank -> home: its partial sums are in the home's inbox
  kSigCombineConsumed = 3,   // home -> expert rank: done reading that rank's partial sums
  kNumNetSignals = 4,
};

// Byte offsets into every rank's window (the same on every rank). Boxes are
// [2 parity][W peer] of one slot each:
//   dispatch inbox  [parity][source]:      header + records, written by the source
//   dispatch outbox [parity][destination]: what this rank puts to a destination of another node
//   combine inbox   [parity][expert rank]: partial sums, one bf16 row per slot
//   combine outbox  [parity][home]:        what this rank puts to a home of another node
// A dispatch slot: header (tokens, then the source's rows per expert for all E
// experts) then max_tokens records; a record: the routing record
// (meta_record_bytes), the row (dispatch type), fp8 scales.
struct NetLayout {
  uint64_t header_bytes;     // 16 + 4 E, rounded to 16
  uint64_t record_bytes;     // one token slot, 16-byte multiple
  uint64_t row_offset;       // row data inside a record (= meta_bytes)
  uint64_t scales_offset;    // fp8 scales inside a record
  uint64_t dispatch_slot;    // header + max_tokens records (256-byte multiple)
  uint64_t dispatch_in, dispatch_out;
  uint64_t combine_slot;     // max_tokens * hidden * 2 (256-byte multiple)
  uint64_t combine_in, combine_out;
  uint64_t total;            // window bytes
};
// Header words (int32) of a dispatch slot.
constexpr int kHeaderTokens = 0;  // tokens in this slot
constexpr int kHeaderCounts = 4;  // [E]: the source's rows for every expert (the overflow check)

NetLayout net_layout(const Params& p);

struct NetParams {
  Params p;          // shape, local arrays (layout, receive side, outputs), epochs, status
  DeviceWindow w;    // the EP window
  NetLayout lay;
};

// Loads every cross-node kernel (and the layout kernel) now: a kernel loaded
// lazily behind one that waits on the proxy stalls the proxy (docs/internode.md,
// "Lazy module loading").
void load_net_kernels();           // net_combine.cu: all of them
void load_net_dispatch_kernels();  // net_dispatch.cu: the dispatch kernels and the layout kernel
void load_layout_kernel();         // layout.cu

void launch_net_dispatch_send(const NetParams& p, cudaStream_t stream);
void launch_net_dispatch_recv(const NetParams& p, cudaStream_t stream);
void launch_net_combine_send(const NetParams& p, cudaStream_t stream);
void launch_net_combine_recv(const NetParams& p, cudaStream_t stream);

}  // namespace ferry::ep
