// ferry-bench ep: what its files share. ep_options.cpp parses the options,
// ep_bench.cpp times ferry and prints the table; ep_check.cpp makes a case's inputs (routing, tokens)
// and verifies the results (--check); ep_nccl.cpp times the NCCL baseline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/ep.hpp"
#include "ferry/types.hpp"

namespace ferry::bench::ep_detail {

constexpr int kScaleBlock = 128;  // fp8: one fp32 scale per 128 columns

struct Options {
  std::vector<EpMode> modes{EpMode::kHighThroughput, EpMode::kLowLatency};
  std::vector<int> tokens;  // empty: 4096 (ht), 128 (ll)
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
  std::vector<int> sms;     // empty: 24 (ht), 0 = all (ll)
  std::vector<DataType> dispatch_types{DataType::kBFloat16, DataType::kFloat8E4M3};
  double skew = 0;          // 0: uniform; > 0: P(expert) ~ 1 / (popularity rank + 1)^skew
  uint64_t seed = 1;
  int iters = 0;            // 0: automatic
  int warmup = 20;
  int graph_iters = 10;
  bool use_graph = true;
  std::string csv_path = "ferry_ep.csv";
  bool use_nccl = true;
  bool check = false;
  bool halves = false;  // also time the four halves one after another
  bool aligned = false;  // an untimed AllReduce before every timed op (ep_align.hpp)
  bool route_ahead = false;  // also time (route, dispatch reusing it, combine): the layout ahead of the dispatch
  int stages_settle_us = 0;  // > 0 (--stages): also time each receive half after its data arrived (ep_stages.cpp)
  std::vector<EpLayout> layouts{EpLayout::kExpanded, EpLayout::kRankRows};  // high-throughput; ll: expanded
  bool layout_given = false;  // --layout named (else rank rows are left out across nodes, with a note)
  bool own_rows_first = false;  // --own-rows-first: rank rows with EpConfig::own_rows_first
  bool zero_copy = false;       // --zero-copy: rank rows with EpConfig::zero_copy_combine
  bool ht_quantize = false;     // --ht-quantize: high-throughput fp8 quantizes bf16 tokens in the kernel
  bool expert_pass = false;     // --expert-pass: the expert GEMM's stand-in between dispatch and combine
};

// The layout as tables and CSVs name it: rank rows with own_rows_first are "rank_rows_own", with
// zero_copy_combine "rank_rows_zc", with both "rank_rows_own_zc" (dispatch rows too: the buffer differs).
inline const char* layout_label(EpLayout layout, const Options& options) {
  if (layout != EpLayout::kRankRows) return ep_layout_name(layout);
  if (options.own_rows_first) return options.zero_copy ? "rank_rows_own_zc" : "rank_rows_own";
  return options.zero_copy ? "rank_rows_zc" : ep_layout_name(layout);
}

inline SequenceTimingOptions timing_options(const Options& options) {
  SequenceTimingOptions timing;
  timing.iterations_per_graph = options.graph_iters;
  timing.warmup_iterations = options.warmup;
  timing.timed_iterations = options.iters;
  timing.use_graph = options.use_graph;
  return timing;
}

size_t bytes_per_token(DataType type, int hidden);  // payload on the wire, fp8 scales included

// The options of ferry-bench ep (ep_options.cpp); UsageError on a bad one.
Options parse_ep_options(std::vector<std::string> args);

// ------------------------------------------------------------------ routing

struct Routing {
  std::vector<int64_t> idx;    // [T, K] expert ids, distinct per token
  std::vector<float> weights;  // [T, K] in [0.05, 1)
};

// Each token picks K distinct experts. Uniform when skew is 0; otherwise expert e
// has weight 1 / (p(e) + 1)^skew, where p is a popularity order (a random
// permutation, the same on every rank, so hot experts spread over the ranks), and
// K are drawn without replacement (Efraimidis-Spirakis: the K largest
// log(u) / weight). Reproducible from (seed, rank).
class Router {
 public:
  Router(int experts, int topk, double skew, uint64_t seed);
  Routing route(int rank, int tokens) const;

 private:
  int experts_;
  int topk_;
  uint64_t seed_;
  std::vector<double> inverse_weight_;
};

// Who sends what to whom, from every rank's routing (counts all-gathered).
struct Traffic {
  int world = 1;
  std::vector<int64_t> tokens;  // [src * world + dst]: tokens of src with >= 1 expert on dst
  std::vector<int64_t> rows;    // [src * world + dst]: (token, expert) pairs of src on dst

  int64_t at(const std::vector<int64_t>& m, int src, int dst) const {
    return m[static_cast<size_t>(src) * world + static_cast<size_t>(dst)];
  }
  int64_t received(const std::vector<int64_t>& m, int dst, bool include_self) const {
    int64_t sum = 0;
    for (int src = 0; src < world; ++src) {
      if (include_self || src != dst) sum += at(m, src, dst);
    }
    return sum;
  }
  int64_t max_received(const std::vector<int64_t>& m, bool include_self) const {
    int64_t best = 0;
    for (int dst = 0; dst < world; ++dst) best = std::max(best, received(m, dst, include_self));
    return best;
  }
  int64_t max_recv_tokens() const { return max_received(tokens, true); }
  int64_t max_nvlink_tokens() const { return max_received(tokens, false); }
  int64_t max_recv_rows() const { return max_received(rows, true); }
};

// ------------------------------------------------------------------ inputs

// One (mode, token count): routing and device inputs, shared by every dispatch type
// and SM count.
struct CaseInputs {
  int tokens = 0;
  Routing routing;
  Traffic traffic;
  std::vector<Routing> all_routings;  // --check: every rank's routing, by rank
  std::optional<DeviceBuffer> x_bf16;    // [T, H]
  std::optional<DeviceBuffer> x_fp8;     // [T, H] e4m3, quantized on the host (high-throughput fp8 input)
  std::optional<DeviceBuffer> x_scales;  // [T, H / 128] fp32
  std::optional<DeviceBuffer> topk_idx;  // [T, K] int64
  std::optional<DeviceBuffer> topk_weights;  // [T, K] fp32
};

void make_inputs(CaseInputs& in, const Options& options, const Router& router, Bootstrap& bootstrap,
                 int local_experts);

// ------------------------------------------------------------------ --check

struct CheckRecord {
  int64_t mismatches = 0;
  char first[200] = {};
  void fail(const std::string& what) {
    if (mismatches++ == 0) std::snprintf(first, sizeof(first), "%s", what.c_str());
  }
};

struct CheckContext {
  const Options& options;
  const CaseInputs& in;
  int rank;
  int world;
  int local_experts;
  EpMode mode;
  DataType type;
};

// Checks what this rank received: per local expert the row count, then each row
// (rows of an expert ordered by source rank, then source token) against the
// regenerated source token (bf16: bit for bit; fp8: within fp8 rounding), and its
// weight. When `expert_outputs` is given, writes there each row times
// expert_scale(e): the input of the combine check.
CheckRecord check_dispatch(const CheckContext& c, const DispatchResult& result, void* expert_outputs);
// The same for EpLayout::kRankRows (ep_check_rank_rows.cpp): rows per source in
// token order, each row's local expert ids and weights, the per-expert row lists;
// expert_outputs gets each row times sum over its local experts of w * expert_scale(e),
// so check_combine applies unchanged.
CheckRecord check_dispatch_rank_rows(const CheckContext& c, const DispatchResult& result, void* expert_outputs);

// Checks out[t] = sum_k w[t][k] * expert_scale(e_k) * x_t against an fp32 host
// reference: |out - ref| <= 1e-2 * sum_k |w y| + 1e-3 (partial sums cross in bf16),
// plus the fp8 rounding of x for an fp8 dispatch.
CheckRecord check_combine(const CheckContext& c, const void* out);

// Every rank's record; rank 0 prints the failures. True when all ranks passed.
bool report_check(Bootstrap& bootstrap, const CheckRecord& mine, const std::string& case_name, const char* stage);

// ------------------------------------------------------------------ stages (ep_stages.cpp)

// What a case's buffer and views are, for time_ep_stages.
struct StageCall {
  EpBuffer& ep;
  TensorView tokens, topk_idx, topk_weights, scales, expert_outputs, out;
  Communicator& comm;  // its proxy, where ranks span nodes, is counted too
};
struct StageTimes {  // us: median over iterations, max over ranks
  double dispatch_send = 0, dispatch_recv_landed = 0, combine_send = 0, combine_recv_landed = 0;
  // This rank's proxy per iteration (dispatch and combine; none: no proxy): descriptors,
  // puts, and microseconds issuing them (fences and waits for room included), and per
  // request from issue to seen complete. Times need FERRY_PROXY_STATS=1.
  bool proxy = false;
  double proxy_descriptors = 0, proxy_puts = 0, proxy_issue_us = 0, proxy_done_us_per_request = 0;
};
// --stages: the halves one by one, each receive half started only after every
// rank's send half finished and options.stages_settle_us more passed (the data
// has landed), so a receive half's time is its local work alone; the --halves
// line's receive time minus this one is the wait for the data. Collective.
StageTimes time_ep_stages(const StageCall& call, const Options& options, Bootstrap& bootstrap, cudaStream_t stream);

}  // namespace ferry::bench::ep_detail
