// Where every buffer of an EpBuffer lives: byte offsets in its one symmetric
// allocation and in its one local cudaMalloc, computed from the config's shape
// (kept apart from EpBuffer so the layout of the symmetric heap is in one place:
// every rank carves the same allocation in the same order, since peers
// rendezvous on it and address each other's regions by these offsets).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ep/ep_params.hpp"
#include "ep/internode_params.hpp"
#include "ferry/symmetric_heap.hpp"

namespace ferry::ep {

// Symmetric regions, in allocation order: the dispatch output (senders write
// rows there), routing records, counts, combine staging, ready words, flags.
struct SymmetricPlan {
  size_t out_tokens, out_scales, meta, counts, combine, combine_ready, stage_ready, flags;
  size_t row_experts, row_weights, expert_rows;  // rank rows only (else empty)
  // NOTE [EP staged low latency] only (else empty), last: the regions above sit at the same offsets with and
  // without staging. Staged buffers bind Params::stage_ready to staged_ready.
  size_t stage_rows, stage_boxes, staged_ready;
  size_t total;  // bytes of the allocation
};

// Local regions, in allocation order: layout, receive side, outputs, epochs.
struct LocalPlan {
  size_t token_slot, pos_in_expert, token_expert, send_expert_count, send_token_count, layout_error,
      layout_block_totals, slot_rows, slot_src_token, recv_token_count, out_weights,
      expert_counts, expert_offsets, epochs, source_offsets;
  size_t total;
};

struct MemoryPlan {
  SymmetricPlan symmetric;
  LocalPlan local;
};

// The cross-node path (internode_params.hpp): the local regions of plan_memory (bound
// and zeroed by bind_local / zero_local as inside a node), then the dispatch
// output (nobody writes it remotely: local memory here), and the window.
struct NetMemoryPlan {
  LocalPlan local;
  size_t out_tokens, out_scales;  // after local.total
  size_t relay;                   // net_relay_bytes (NOTE [EP across nodes: one waiter per grid]), zeroed
  size_t total;                   // bytes of the local allocation
  NetLayout window;
};

// The plan for the shape in `p` (world_size, max_tokens, hidden, topk,
// num_experts, local_experts, fp8_out, capacity_rows, meta_bytes, num_chunks
// set); out_weights is empty without weights.
MemoryPlan plan_memory(const Params& p, bool with_weights);

// NOTE [EP staged low latency] (staged_dispatch.cu): whether an expanded low-latency buffer inside a node sends through
// staging rows. FERRY_EP_LL_STAGED decides where set. Unset: buffers whose largest call's rows (max_tokens x hidden
// x element bytes) take at most kStagedRowsMaxBytes, fp8 or bf16 (staged_rows_fit; the receive layout must fit
// too, staged_receive_fits). Sessions 30-36 bounded bf16 lower (2 MiB): the combine after a staged bf16 dispatch
// read 1.017 at T=256 in session 36. With the tagged boxes (session 37, c3, 3 rounds) that combine reads 0.997 /
// 1.001 / 0.980 at T=128 / 256 / 512, but 1.007 at T=768 (11 MB of bf16 rows; the dispatch 0.906), hence 8 MiB. The
// shape and the environment are the same on every rank, so all ranks agree (senders and receivers must).
constexpr size_t kStagedRowsMaxBytes = size_t(8) << 20;
bool staged_rows_fit(int max_tokens, int hidden, bool fp8);
bool stages_low_latency_rows(int max_tokens, int hidden, bool fp8);

// The plan of the cross-node path; sets p.out_tokens / p.out_scales once
// bound to `local` with bind_net_outputs.
NetMemoryPlan plan_net_memory(const Params& p, bool with_weights);
void bind_net_outputs(Params& p, const NetMemoryPlan& plan, uint8_t* local);

// Points p's peer tables (and out_tokens, out_scales: this rank's part) into
// `buffer`, entry i at global rank ranks[i] (the node's ranks).
void bind_symmetric(Params& p, const SymmetricPlan& plan, const SymmetricBuffer& buffer, const std::vector<int>& ranks);

// Points p's local fields into `local` (the plan's total bytes of device memory).
void bind_local(Params& p, const LocalPlan& plan, uint8_t* local, bool with_weights);

// Zeroes everything in `local` but the dispatch weights (epochs, counts,
// barrier and error words start at 0; weights are written before they are read).
void zero_local(const LocalPlan& plan, uint8_t* local);

}  // namespace ferry::ep
