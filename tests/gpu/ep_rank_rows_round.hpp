// One EP round with EpLayout::kRankRows on real GPUs (test_ep_rank_rows.cpp,
// test_ep_own_rows_first.cpp): one row per (token, source rank),
// checked against the host reference (common/ep_reference.hpp) in every round:
// rows per source and their order, every row's data (bf16 bitwise, fp8
// quantization within the e4m3 bound with the prescribed scale, fp8 input
// bitwise), each row's local expert ids and weights, the per-expert counts,
// offsets and row lists (padding -1), then a combine of already-weighted rows
// (the caller's sum over its local experts) against the weighted sum over the
// token's experts. Outputs are poisoned before each round.
#pragma once

#include <cstdint>
#include <vector>

#include "common/ep_reference.hpp"
#include "ferry/ep.hpp"
#include "gpu/ep_harness.hpp"

namespace ferry::testing::ep_gpu {

EpConfig rank_rows_config(DataType dtype, int tokens, int hidden, int topk, int local_experts, bool weights,
                          int alignment, int num_sms = 0, bool own_rows_first = false,
                          bool zero_copy_combine = false);

struct RoundOptions {
  bool idx64 = false;
  bool sync_counts = true;
  bool halves = false;
  bool graph = false;  // dispatch + combine captured in one CUDA graph, then replayed
  bool fp8_input = false;
  bool route_ahead = false;  // EpBuffer::route on a side stream first, then the dispatch reuses its handle
};

// A round whose halves (dispatch_send ... combine_recv) run one after the other.
RoundOptions halves_apart();

// Before the first round on a new buffer (it may sit at the last one's address,
// whose outputs the next round would poison).
void forget_previous_round();

// One checked dispatch + combine. Collective; false on every rank if any rank threw.
bool rank_rows_round(Harness& h, const ep::Spec& s, const RoundOptions& o);
// The same with a fresh spec of the buffer's config (a new seed each call).
bool run_round(Harness& h, ep::Routing routing, ep::TokenCounts counts, const RoundOptions& o = {}, int hot = 0);

// The caller's combine input for a rank-rows dispatch of s on this rank whose received values the host knows
// (bf16, or fp8 input): one row per received row in the dispatch's order, each the weighted sum over the row's
// local experts of the stand-in experts, in bf16 (what every round's combine takes; its sums: combine_reference).
std::vector<uint16_t> exact_combine_input(const ep::Spec& s, const std::vector<ep::RankInput>& all,
                                          bool own_rows_first);

// One round to size the buffers and load the kernels, then, while a stand-in for the user's kernels holds all SMs
// but 1 or 3 on every rank (sm_hog.hpp), a round overlapped and one as halves. Collective.
bool rounds_on_few_free_sms(Harness& h);

// A buffer config of the caller's contract: dtype, max tokens per rank, alignment, SMs (hidden 2048, top-8, 4
// local experts).
using RankRowsConfig = EpConfig (*)(DataType dtype, int tokens, int alignment, int num_sms);
// Dispatch + combine captured in one CUDA graph and replayed, with bf16 (on bf16_sms) and fp8 input (on 24 SMs),
// 200 tokens: 3 rounds with dropped experts and varied counts, then a full round (in the graph, or outside it on
// the same buffer when !last_in_graph); then 1000 tokens (several layout blocks) with int64 ids on each of
// many_sms: a uniform round and a skewed one as halves. Collective; false once a round failed.
bool graph_and_many_tokens(RankRowsConfig config, int bf16_sms, bool last_in_graph, std::vector<int> many_sms);

}  // namespace ferry::testing::ep_gpu
