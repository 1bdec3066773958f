// EpBuffer's private state, shared by the files that implement EpBuffer
// (ep_buffer.cpp: construction and the four halves; ep_overlap.cpp: dispatch()
// and combine(), the halves run at once).
#pragma once

#include <optional>

#include <cstdint>
#include <memory>

#include "ep/ep_call_state.hpp"
#include "ep/ep_overlap.hpp"
#include "ep/ep_paths.hpp"
#include "ep/ep_params.hpp"
#include "ep/internode_params.hpp"
#include "ferry/ep.hpp"
#include "ferry/symmetric_heap.hpp"
#include "ferry/window.hpp"

namespace ferry {

struct EpBuffer::State {
  ep::Params base{};                 // fields that do not change between calls
  SymmetricBuffer symmetric;
  void* local = nullptr;             // cudaMalloc: layout, receive side, outputs, epochs
  ep::EpStatus* status = nullptr;    // host-mapped
  ep::EpStatus* status_device = nullptr;
  int64_t* host_offsets = nullptr;   // pinned: expert_offsets copied back (high-throughput sync)
  int32_t* host_counts = nullptr;
  int64_t* host_rows = nullptr;      // pinned: rank rows received (source_offsets[world])
  const ep::EpPath* path = nullptr;  // chosen once (ep_paths.hpp)
  ep::CallState calls;               // NOTE [EpBuffer call order]
  const void* combine_expert_outputs = nullptr;  // of the latest combine_send (rank rows: read by combine_recv)
  bool overlap = true;               // dispatch()/combine(): both halves at once
  bool fuse_layout = true;           // NOTE [EP fused layout]; FERRY_EP_FUSE_LAYOUT=0 turns it off (to compare)
  int dispatch_recv_blocks = 1;      // of num_sms, when overlapping
  int combine_recv_blocks = 1;
  bool combine_one_role = false;     // combine() takes one role (NOTE [EP combine one role], combine.cu): the
                                     // path has it, high throughput, FERRY_EP_COMBINE_ONE_ROLE not 0
  int combine_prefetch_max_blocks = 48;  // NOTE [EP combine L2 prefetch]: FERRY_EP_COMBINE_PREFETCH_MAX_BLOCKS
  std::optional<int64_t> rank_rows_local_blocks;  // FERRY_EP_RANK_ROWS_LOCAL_BLOCKS (else rank_rows_local_blocks())
  ep::HalfGrids grids;
  // NOTE [EP own rows first]: the copy engine's side stream and the events that fork it from the
  // caller's stream (dispatch_send) and join it back (by the end of the dispatch); created with own_rows_first.
  std::optional<int64_t> own_rows_copy_percent;  // FERRY_EP_OWN_ROWS_COPY_PERCENT (else own_rows_copy_percent())
  cudaStream_t copy_stream = nullptr;
  cudaEvent_t copy_fork = nullptr, copy_join = nullptr;
  bool copy_pending = false;         // a dispatch_send's copy not yet joined
  // Ranks in several nodes: the cross-node path (internode_dispatch.cu, internode_combine.cu) on `window`, with
  // the layout kernel and base's local arrays; nothing symmetric otherwise.
  bool spans_nodes = false;
  std::unique_ptr<Window> window;
  ep::NetLayout net_layout{};
  ep::NetRelays net_relays{};  // in `local` (NOTE [EP across nodes: one waiter per grid])
  ep::NetParams net(const ep::Params& p) const { return ep::NetParams{p, window->device(), net_layout, net_relays}; }
  // High-throughput, several ranks per node (unless FERRY_EP_HIERARCHICAL=0): the
  // hierarchical path (internode_hier.cuh) on the same window; `hier_base` holds its
  // topology and local arrays (hier_local), `np` is filled per call.
  bool hierarchical = false;
  void* hier_local = nullptr;
  ep::HierParams hier_base{};
  ep::HierParams hier(const ep::Params& p) const {
    ep::HierParams h = hier_base;
    h.np = net(p);
    return h;
  }
};

}  // namespace ferry
