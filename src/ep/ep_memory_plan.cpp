// EpBuffer's memory plan (ep_memory_plan.hpp). The order and sizes of the
// symmetric regions must not change without every rank changing with them.
#include "ep/ep_memory_plan.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "common/knobs.hpp"
#include "ferry/cuda_check.hpp"
#include "memory/node_region.hpp"

namespace ferry::ep {
namespace {

size_t round4k(size_t v) { return (v + 4095) / 4096 * 4096; }

// Bump allocator over one allocation: regions are 4 KB aligned.
struct Carve {
  size_t total = 0;
  size_t take(size_t bytes) {
    const size_t at = total;
    total += round4k(std::max<size_t>(bytes, 1));
    return at;
  }
};

}  // namespace

MemoryPlan plan_memory(const Params& p, bool with_weights) {
  const int W = p.world_size, T = p.max_tokens, H = p.hidden, K = p.topk, E = p.num_experts;
  const int Le = p.local_experts;
  const bool fp8 = p.fp8_out;
  MemoryPlan plan{};

  SymmetricPlan& s = plan.symmetric;
  Carve sym;
  s.out_tokens = sym.take(size_t(p.capacity_rows) * H * (fp8 ? 1 : 2));
  s.out_scales = sym.take(fp8 ? sizeof(float) * size_t(p.capacity_rows) * (H / kScaleBlock) : 0);
  s.meta = sym.take(size_t(W) * T * p.meta_bytes);
  s.counts = sym.take(sizeof(uint64_t) * 2 * W * (E + W));  // NOTE [EP tagged counts]
  s.combine = sym.take(size_t(W) * T * H * 2);
  s.combine_ready = sym.take(sizeof(uint64_t) * size_t(W) * T * std::max(p.num_chunks, p.combine_num_chunks));
  s.stage_ready = sym.take(sizeof(uint64_t) * size_t(W) * T * p.num_chunks);
  s.flags = sym.take(sizeof(uint64_t) * kNumFlagSlots);
  const size_t rank_rows = p.rank_rows ? size_t(p.capacity_rows) * K : 0;
  s.row_experts = sym.take(sizeof(int32_t) * rank_rows);
  s.row_weights = sym.take(with_weights ? sizeof(float) * rank_rows : 0);
  s.expert_rows = sym.take(p.rank_rows ? sizeof(int32_t) * size_t(p.index_capacity) : 0);
  // NOTE [EP staged low latency]: rows, routing boxes and ready words by parity, after every other region, so
  // that those sit where they do without staging (a staged buffer leaves meta and stage_ready unused; its
  // Params::stage_ready is staged_ready).
  s.stage_rows = sym.take(p.staged_rows ? size_t(2) * W * T * p.stage_row_bytes : 0);
  s.stage_boxes = sym.take(p.staged_rows ? size_t(2) * W * p.stage_box_bytes : 0);
  s.staged_ready = sym.take(p.staged_rows ? sizeof(uint64_t) * 2 * size_t(W) * T * p.num_chunks : 0);
  s.total = sym.total;

  LocalPlan& l = plan.local;
  Carve loc;
  l.token_slot = loc.take(sizeof(int32_t) * size_t(T) * W);
  l.pos_in_expert = loc.take(sizeof(int32_t) * size_t(T) * K);
  l.token_expert = loc.take(sizeof(int32_t) * size_t(T) * K);
  l.send_expert_count = loc.take(sizeof(int32_t) * E);
  l.send_token_count = loc.take(sizeof(int32_t) * W);
  l.layout_error = loc.take(sizeof(int32_t));
  l.layout_block_totals =
      loc.take(sizeof(int32_t) * size_t((T + kLayoutThreads - 1) / kLayoutThreads) * (E + W + 1));
  // NOTE [EP slot weights]: with weights, the rows' weights follow them.
  const size_t slot_parts = with_weights && !p.rank_rows ? 2 : 1;
  l.slot_rows = loc.take(slot_parts * sizeof(int32_t) * size_t(W) * T * K);
  l.slot_src_token = loc.take(sizeof(int32_t) * size_t(W) * T);
  l.recv_token_count = loc.take(sizeof(int32_t) * W);
  l.out_weights = loc.take(with_weights && !p.rank_rows ? sizeof(float) * size_t(p.capacity_rows) : 0);
  l.expert_counts = loc.take(sizeof(int32_t) * Le);
  l.expert_offsets = loc.take(sizeof(int64_t) * (Le + 1));
  l.epochs = loc.take(sizeof(Epochs));
  l.source_offsets = loc.take(sizeof(int64_t) * (W + 1));
  l.total = loc.total;
  return plan;
}

bool staged_rows_fit(int max_tokens, int hidden, bool fp8) {
  // 2x H100, 2 ranks, 132 SMs, staged / direct dispatch time. Session 30 (c4, c5): bf16 T=1 / 128 / 512 (rows of 14
  // KB, 1.8 MB, 7.3 MB) 0.914 / 0.957 / 1.043, fp8 0.921 / 0.932 / 0.958. Session 36 (the receive's own layout, c6):
  // fp8 0.925 / 0.863 / 0.864 / 0.886 at T=1 / 128 / 256 / 512, bf16 0.868 / 0.825 / 0.890 at T=1 / 128 / 256.
  // Session 37 (tagged boxes, c3, the knob on against the 4 / 2 MiB bounds): bf16 0.800 / 0.841 / 0.906 at T=256 /
  // 512 / 768, fp8 0.751 at T=768 (5.5 MB); the combine after bf16 T=768 read 1.007 (ep_memory_plan.hpp).
  return size_t(max_tokens) * hidden * (fp8 ? 1 : 2) <= kStagedRowsMaxBytes;
}

bool stages_low_latency_rows(int max_tokens, int hidden, bool fp8) {
  return knobs::kEpLlStaged.read().value_or(staged_rows_fit(max_tokens, hidden, fp8));
}

void set_net_ranges(NetLayout& l, const Params& p, uint64_t min_range_bytes) {
  // NOTE [EP across nodes: pipelined ranges]: at least min_range_bytes a range, at most kMaxNetRanges ranges.
  const uint64_t T = p.max_tokens;
  const uint64_t by_count = (T + kMaxNetRanges - 1) / kMaxNetRanges;
  auto per_range = [&](uint64_t item_bytes) {
    const uint64_t by_bytes = min_range_bytes / item_bytes + (min_range_bytes % item_bytes != 0);
    return static_cast<uint32_t>(std::min<uint64_t>(std::max<uint64_t>({1, by_bytes, by_count}), std::max<uint64_t>(T, 1)));
  };
  l.range_records = per_range(l.record_bytes);
  l.max_ranges = static_cast<uint32_t>((T + l.range_records - 1) / l.range_records);
  l.combine_range_rows = per_range(uint64_t(p.hidden) * 2);  // a combine partial: one bf16 row per slot
  l.combine_max_ranges = static_cast<uint32_t>((T + l.combine_range_rows - 1) / l.combine_range_rows);
}

NetLayout net_layout(const Params& p) {
  const uint64_t T = p.max_tokens, H = p.hidden, E = p.num_experts, W = p.world_size;
  const uint64_t elem = p.fp8_out ? 1 : 2;
  auto round_to = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  NetLayout l{};
  // NOTE [EP across nodes: aligned records]: the header, each record and each record's row start on
  // kRecordAlign bytes, so a warp's stores of a row cover whole lines of the landing (over UCX shared memory
  // or tcp in host memory, where a partly written line costs the memory a read-modify-write, and the PCIe a
  // short write). 16-byte records put every row 112 bytes (bf16, top-8) past a line.
  l.header_bytes = round_to(sizeof(int32_t) * (kHeaderCounts + E), kRecordAlign);
  l.row_offset = round_to(p.meta_bytes, kRecordAlign);
  l.scales_offset = l.row_offset + H * elem;
  l.record_bytes = round_to(l.scales_offset + (p.fp8_out ? sizeof(float) * (H / kScaleBlock) : 0), kRecordAlign);
  l.dispatch_slot = round_to(l.header_bytes + T * l.record_bytes, 256);
  l.combine_slot = round_to(T * H * 2, 256);
  l.dispatch_in = 0;
  l.dispatch_out = l.dispatch_in + 2 * W * l.dispatch_slot;
  l.combine_in = l.dispatch_out + 2 * W * l.dispatch_slot;
  l.combine_out = l.combine_in + 2 * W * l.combine_slot;
  l.total = l.combine_out + 2 * W * l.combine_slot;
  return l;
}

HierLayout hier_layout(const Params& p, const NetLayout& base, int num_nodes, int ranks_per_node) {
  const uint64_t T = p.max_tokens, H = p.hidden, E = p.num_experts, N = num_nodes, R = ranks_per_node;
  auto round_to = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  HierLayout h{};
  h.fwd_header_bytes = round_to(sizeof(int32_t) * (kFwdHeaderCounts + E), 16);
  h.fwd_record_bytes = sizeof(int32_t) * kFwdPrefixWords + base.record_bytes;
  h.fwd_slot = round_to(h.fwd_header_bytes + T * h.fwd_record_bytes, 256);
  h.cfwd_slot = round_to(T * H * 2, 256);
  h.fwd_in = round_to(base.total, 256);
  h.fwd_out = h.fwd_in + 2 * N * h.fwd_slot;
  h.cfwd_in = h.fwd_out + 2 * N * h.fwd_slot;
  h.total = h.cfwd_in + 2 * R * N * h.cfwd_slot;
  return h;
}

HierLocalPlan plan_hier_local(int max_tokens, int num_nodes) {
  const size_t T = max_tokens, N = num_nodes, word = sizeof(int32_t);
  HierLocalPlan h{};
  size_t at = 0;
  auto take = [&](size_t words) {
    const size_t offset = at;
    at += (words * word + 255) / 256 * 256;
    return offset;
  };
  h.fwd_count = take(kMaxRanks);
  h.fwd_index = take(T * N);
  h.fwd_records = take(N * T * kFwdPrefixWords);
  h.fwd_record_count = take(kMaxRanks);
  h.blocks_done = take(2);
  h.total = at;
  return h;
}

NetMemoryPlan plan_net_memory(const Params& p, bool with_weights) {
  NetMemoryPlan plan{};
  plan.local = plan_memory(p, with_weights).local;
  Carve loc{plan.local.total};
  plan.out_tokens = loc.take(size_t(p.capacity_rows) * p.hidden * (p.fp8_out ? 1 : 2));
  plan.out_scales = loc.take(p.fp8_out ? sizeof(float) * size_t(p.capacity_rows) * (p.hidden / kScaleBlock) : 0);
  plan.relay = loc.take(net_relay_bytes(p.world_size, p.num_experts));
  plan.total = loc.total;
  plan.window = net_layout(p);
  return plan;
}

void bind_net_outputs(Params& p, const NetMemoryPlan& plan, uint8_t* local) {
  p.out_tokens = local + plan.out_tokens;
  p.out_scales = p.fp8_out ? reinterpret_cast<float*>(local + plan.out_scales) : nullptr;
}

void bind_symmetric(Params& p, const SymmetricPlan& plan, const SymmetricBuffer& buffer,
                    const std::vector<int>& ranks) {
  p.peer_out_tokens = node_region<uint8_t>(buffer, ranks, plan.out_tokens);
  p.peer_out_scales = p.fp8_out ? node_region<float>(buffer, ranks, plan.out_scales) : device::NodeRegion<float>{};
  p.stage_meta = node_region<uint8_t>(buffer, ranks, plan.meta);
  p.counts = node_region<uint64_t>(buffer, ranks, plan.counts);
  p.combine_stage = node_region<uint8_t>(buffer, ranks, plan.combine);
  p.combine_ready = node_region<uint64_t>(buffer, ranks, plan.combine_ready);
  p.stage_ready = node_region<uint64_t>(buffer, ranks, p.staged_rows ? plan.staged_ready : plan.stage_ready);
  p.flags = device::NodeFlags{node_region<uint64_t>(buffer, ranks, plan.flags), p.rank, p.world_size};
  p.out_tokens = p.peer_out_tokens.at(p.rank);
  p.out_scales = p.peer_out_scales.at(p.rank);
  if (p.staged_rows) {
    p.stage_rows = node_region<uint8_t>(buffer, ranks, plan.stage_rows);
    p.stage_boxes = node_region<uint8_t>(buffer, ranks, plan.stage_boxes);
  }
  if (p.rank_rows) {
    p.peer_row_experts = node_region<int32_t>(buffer, ranks, plan.row_experts);
    p.peer_row_weights = node_region<float>(buffer, ranks, plan.row_weights);
    p.peer_expert_rows = node_region<int32_t>(buffer, ranks, plan.expert_rows);
    p.out_row_experts = p.peer_row_experts.at(p.rank);
    p.out_row_weights = p.peer_row_weights.at(p.rank);
    p.out_expert_rows = p.peer_expert_rows.at(p.rank);
  }
}

void bind_local(Params& p, const LocalPlan& plan, uint8_t* l, bool with_weights) {
  p.token_slot = reinterpret_cast<int32_t*>(l + plan.token_slot);
  p.pos_in_expert = reinterpret_cast<int32_t*>(l + plan.pos_in_expert);
  p.token_expert = reinterpret_cast<int32_t*>(l + plan.token_expert);
  p.send_expert_count = reinterpret_cast<int32_t*>(l + plan.send_expert_count);
  p.send_token_count = reinterpret_cast<int32_t*>(l + plan.send_token_count);
  p.layout_error = reinterpret_cast<int32_t*>(l + plan.layout_error);
  p.layout_block_totals = reinterpret_cast<int32_t*>(l + plan.layout_block_totals);
  p.slot_rows = reinterpret_cast<int32_t*>(l + plan.slot_rows);
  p.slot_src_token = reinterpret_cast<int32_t*>(l + plan.slot_src_token);
  p.recv_token_count = reinterpret_cast<int32_t*>(l + plan.recv_token_count);
  p.out_weights = with_weights && !p.rank_rows ? reinterpret_cast<float*>(l + plan.out_weights) : nullptr;
  p.expert_counts = reinterpret_cast<int32_t*>(l + plan.expert_counts);
  p.expert_offsets = reinterpret_cast<int64_t*>(l + plan.expert_offsets);
  p.epochs = reinterpret_cast<Epochs*>(l + plan.epochs);
  p.source_offsets = reinterpret_cast<int64_t*>(l + plan.source_offsets);
}

void zero_local(const LocalPlan& plan, uint8_t* l) {
  // The weights are the only region between the two ranges.
  FERRY_CUDA_CHECK(cudaMemset(l, 0, plan.out_weights));
  FERRY_CUDA_CHECK(cudaMemset(l + plan.expert_counts, 0, plan.total - plan.expert_counts));
}

}  // namespace ferry::ep
