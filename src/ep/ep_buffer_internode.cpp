// EpBuffer's construction for communicators that span nodes (ep_buffer.cpp builds
// the rest): the direct path's window, ranges and local arrays, and the
// hierarchical path's forward boxes on the same window.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/knobs.hpp"
#include "ep/ep_buffer_state.hpp"
#include "ep/ep_memory_plan.hpp"
#include "ep/ep_params.hpp"
#include "ep/halves_split.hpp"
#include "ep/internode_params.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/window.hpp"

namespace ferry {

// NOTE [EP across nodes] (internode_dispatch.cu, internode_combine.cu): the layout kernel, then the cross-node
// kernels on one Window; local memory for the layout, the receive side and the
// dispatch output. On the direct path the halves run at once in high throughput
// (ranges, NOTE [EP across nodes: pipelined ranges]) and one after the other in
// low latency; each grid small enough that the ranks sharing this GPU fit on it
// together: their blocks wait for each other's signals.
void EpBuffer::init_cross_node() {
  State& st = *state_;
  // The overlapped halves' SMs (halves_split.hpp), once the window says where the network writes.
  auto set_halves_split = [&](bool network_writes_device_memory) {
    ep::HalvesShape shape = ep::halves_shape(config_, comm_.size());
    shape.spans_nodes = true;
    shape.hierarchical = st.hierarchical;
    shape.network_writes_device_memory = network_writes_device_memory;
    const ep::HalvesSplit split = ep::halves_split(shape);
    st.dispatch_recv_blocks = split.dispatch_recv_blocks;
    st.combine_recv_blocks = split.combine_recv_blocks;
  };
  ep::Params& p = st.base;
  const ep::NetMemoryPlan plan = ep::plan_net_memory(p, config_.with_weights);
  st.net_layout = plan.window;
  const Topology& topo = comm_.topology();
  const uint64_t window_bytes =
      st.hierarchical ? ep::hier_layout(p, plan.window, topo.num_nodes, topo.local_size).total : plan.window.total;
  // Which ranks share this GPU (FERRY_TEST_SHARE_GPUS, virtual nodes on one
  // machine), and whether every rank has the memory (decided together: a rank
  // that threw alone would leave the others waiting in the window's rendezvous).
  struct Where {
    char host[64];
    char bus[32];
    uint64_t free_bytes;
  };
  Where me{};
  gethostname(me.host, sizeof(me.host) - 1);
  FERRY_CUDA_CHECK(cudaDeviceGetPCIBusId(me.bus, sizeof(me.bus) - 1, comm_.device()));
  size_t free_bytes = 0, total_bytes = 0;
  FERRY_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  me.free_bytes = free_bytes;
  const uint64_t needed = window_bytes + plan.total;
  const std::vector<Where> all = comm_.bootstrap().all_gather_value(me);
  auto same_gpu = [](const Where& a, const Where& b) {
    return std::strncmp(a.host, b.host, sizeof(a.host)) == 0 && std::strncmp(a.bus, b.bus, sizeof(a.bus)) == 0;
  };
  for (size_t r = 0; r < all.size(); ++r) {
    uint64_t ranks_there = 0;
    for (const Where& w : all) ranks_there += same_gpu(w, all[r]);
    FERRY_CHECK(all[r].free_bytes >= needed * ranks_there, NotSupported,
                "EpBuffer: across nodes each rank needs " << needed << " bytes of GPU memory (a window of "
                    << window_bytes << " bytes: dispatch and combine boxes, [2][" << p.world_size
                    << " ranks] of " << p.max_tokens << " tokens each, and the dispatch output), but the GPU of rank "
                    << r << " (" << ranks_there << " rank(s) on it) has " << all[r].free_bytes
                    << " bytes free; lower max_tokens_per_rank or hidden");
  }
  // Blocks of the ranks on one GPU wait for each other: all of them fit at once
  // (config_.num_sms is within the communicator's SM budget, NOTE [SM budget]).
  p.num_blocks = std::max(1, config_.num_sms);

  FERRY_CUDA_CHECK(cudaMalloc(&st.local, plan.total));
  auto* l = static_cast<uint8_t*>(st.local);
  ep::bind_local(p, plan.local, l, config_.with_weights);
  ep::zero_local(plan.local, l);
  ep::bind_net_outputs(p, plan, l);
  FERRY_CUDA_CHECK(cudaMemset(l + plan.relay, 0, ep::net_relay_bytes(p.world_size, p.num_experts)));
  st.net_relays.flags = reinterpret_cast<uint64_t*>(l + plan.relay);
  st.net_relays.headers = reinterpret_cast<int32_t*>(st.net_relays.flags + ep::kNumRelays);
  st.net_relays.range_written =
      reinterpret_cast<uint32_t*>(st.net_relays.headers + size_t(p.world_size) * (ep::kHeaderCounts + p.num_experts));
  st.net_relays.combine_range_written = st.net_relays.range_written + size_t(p.world_size) * ep::kMaxNetRanges;
  if (st.hierarchical) {
    set_halves_split(false);
    init_hierarchical();
    return;
  }
  st.window = std::make_unique<Window>(comm_, plan.window.total, WindowOptions{ep::kNumNetSignals});
  set_halves_split(st.window->network_writes_device_memory());  // NOTE [EP across nodes: halves' split]
  // NOTE [EP across nodes: range size]: every range costs a signal, and where the proxy moves it a put
  // (over cuda_ipc a copy-engine operation with its fixed cost: 512 KiB ranges made the fp8 dispatch
  // 1.20x slower there, 2x H100, session 13). Peers whose landing this rank maps take stores, no put.
  // Low-latency calls are small: no ranges at all, one box per destination and the halves one after the
  // other, as before ranges (session 13: several ranges made them 1.36-1.75x slower over cuda_ipc).
  st.net_layout.pipelined = config_.mode == EpMode::kHighThroughput ? 1u : 0u;
  // Its halves overlap only with ranges: a receive half waits for whole boxes otherwise.
  st.overlap = st.overlap && st.net_layout.pipelined != 0;
  uint64_t range_bytes = UINT64_MAX;  // low latency: one range per box (the kernels use none)
  if (st.net_layout.pipelined) {
    range_bytes = knobs::kEpNetRangeBytes.value();
    if (range_bytes == 0) {
      bool proxy_moves = false;
      for (int r = 0; r < comm_.size(); ++r) proxy_moves = proxy_moves || (!topo.same_node(r) && !st.window->maps_peer(r));
      // Sender and receiver cut a box into the same ranges, so every rank takes the same size.
      const int mine = proxy_moves ? 1 : 0;
      for (int any : comm_.bootstrap().all_gather_value(mine)) proxy_moves = proxy_moves || any != 0;
      range_bytes = proxy_moves ? ep::kProxyRangeBytes : ep::kMinRangeBytes;
    }
  }
  ep::set_net_ranges(st.net_layout, p, range_bytes);
  ep::load_net_kernels();  // docs/internode.md, "Lazy module loading"
}

// NOTE [EP hierarchical] (internode_hier.cuh): the direct path's window with the
// forward boxes after it, more signal words, and local arrays for the forward
// indices and records.
void EpBuffer::init_hierarchical() {
  State& st = *state_;
  const Topology& topo = comm_.topology();
  ep::HierParams& h = st.hier_base;
  h.num_nodes = topo.num_nodes;
  h.per_node = topo.local_size;
  h.node = topo.node;
  h.local = topo.local_rank;
  for (int r = 0; r < comm_.size(); ++r) {
    h.node_of[r] = topo.node_of_rank[r];
    h.local_of[r] = topo.local_rank_of_rank[r];
    h.rank_at[topo.node_of_rank[r] * h.per_node + topo.local_rank_of_rank[r]] = r;
  }
  h.hl = ep::hier_layout(st.base, st.net_layout, h.num_nodes, h.per_node);
  const ep::HierLocalPlan plan = ep::plan_hier_local(st.base.max_tokens, h.num_nodes);
  FERRY_CUDA_CHECK(cudaMalloc(&st.hier_local, plan.total));
  FERRY_CUDA_CHECK(cudaMemset(st.hier_local, 0, plan.total));
  auto* l = static_cast<uint8_t*>(st.hier_local);
  h.fwd_count = reinterpret_cast<int32_t*>(l + plan.fwd_count);
  h.fwd_index = reinterpret_cast<int32_t*>(l + plan.fwd_index);
  h.fwd_records = reinterpret_cast<int32_t*>(l + plan.fwd_records);
  h.fwd_record_count = reinterpret_cast<int32_t*>(l + plan.fwd_record_count);
  h.blocks_done = reinterpret_cast<unsigned*>(l + plan.blocks_done);
  st.window = std::make_unique<Window>(comm_, h.hl.total, WindowOptions{ep::kNumHierSignals});
  ep::load_hier_kernels();  // docs/internode.md, "Lazy module loading" (the direct path's too: cheap, and
  ep::load_net_kernels();   // nothing of this EpBuffer then loads lazily)
}

}  // namespace ferry
