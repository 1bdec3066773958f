// ferry-bench ep: its options and its usage text (ep_bench.cpp runs the cases).
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "ep_check.hpp"

namespace ferry::bench {
namespace ep_detail {
namespace {

std::vector<int> parse_int_list(const std::string& option, const std::string& text, bool allow_zero) {
  std::vector<int> values;
  for (const std::string& item : split_list(text)) {
    values.push_back(allow_zero ? parse_nonnegative_int(option, item) : parse_positive_int(option, item));
  }
  if (values.empty()) throw UsageError("option " + option + " needs at least one value");
  return values;
}

}  // namespace

Options parse_ep_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options options;
  if (auto v = parser.take_value("--mode")) {
    if (*v == "ht") options.modes = {EpMode::kHighThroughput};
    else if (*v == "ll") options.modes = {EpMode::kLowLatency};
    else if (*v != "both") throw UsageError("--mode must be ht, ll or both, got '" + *v + "'");
  }
  if (auto v = parser.take_value("--tokens")) options.tokens = parse_int_list("--tokens", *v, false);
  if (auto v = parser.take_value("--hidden")) options.hidden = parse_positive_int("--hidden", *v);
  if (auto v = parser.take_value("--topk")) options.topk = parse_positive_int("--topk", *v);
  if (auto v = parser.take_value("--experts")) options.experts = parse_positive_int("--experts", *v);
  if (auto v = parser.take_value("--sms")) options.sms = parse_int_list("--sms", *v, true);
  if (auto v = parser.take_value("--dispatch-types")) {
    options.dispatch_types.clear();
    for (const std::string& item : split_list(*v)) {
      if (item == "bf16") options.dispatch_types.push_back(DataType::kBFloat16);
      else if (item == "fp8") options.dispatch_types.push_back(DataType::kFloat8E4M3);
      else throw UsageError("unknown dispatch type '" + item + "' (expected bf16, fp8)");
    }
    if (options.dispatch_types.empty()) throw UsageError("--dispatch-types needs at least one type");
  }
  if (auto v = parser.take_value("--layout")) {
    options.layout_given = true;
    if (*v == "expanded") options.layouts = {EpLayout::kExpanded};
    else if (*v == "rank_rows") options.layouts = {EpLayout::kRankRows};
    else if (*v != "both") throw UsageError("--layout must be expanded, rank_rows or both, got '" + *v + "'");
  }
  if (auto v = parser.take_value("--skew")) options.skew = parse_nonnegative_double("--skew", *v);
  if (auto v = parser.take_value("--seed")) options.seed = static_cast<uint64_t>(parse_nonnegative_int("--seed", *v));
  if (auto v = parser.take_value("--iters")) options.iters = parse_positive_int("--iters", *v);
  if (auto v = parser.take_value("--warmup")) options.warmup = parse_nonnegative_int("--warmup", *v);
  if (auto v = parser.take_value("--graph-iters")) options.graph_iters = parse_positive_int("--graph-iters", *v);
  if (auto v = parser.take_value("--csv")) options.csv_path = *v;
  options.use_graph = !parser.take_flag("--no-graph");
  options.use_nccl = !parser.take_flag("--no-nccl");
  options.check = parser.take_flag("--check");
  options.halves = parser.take_flag("--halves");
  options.aligned = parser.take_flag("--aligned");
  options.route_ahead = parser.take_flag("--route-ahead");
  options.own_rows_first = parser.take_flag("--own-rows-first");
  options.zero_copy = parser.take_flag("--zero-copy");
  options.ht_quantize = parser.take_flag("--ht-quantize");
  options.expert_pass = parser.take_flag("--expert-pass");
  if (parser.take_flag("--stages")) options.stages_settle_us = 20000;
  if (auto v = parser.take_value("--stages-settle-us"))
    options.stages_settle_us = parse_positive_int("--stages-settle-us", *v);
  parser.finish();

  if (options.hidden % kScaleBlock != 0) {
    throw UsageError("--hidden " + std::to_string(options.hidden) +
                     " must be a multiple of 128 (fp8 scales cover 128 columns)");
  }
  if (options.topk > options.experts) {
    throw UsageError("--topk " + std::to_string(options.topk) + " is larger than --experts " +
                     std::to_string(options.experts) + " (a token picks distinct experts)");
  }
  return options;
}

}  // namespace ep_detail

void print_ep_usage(std::FILE* out) {
  std::fprintf(out,
      "usage: mpirun -np N ferry-bench ep [options]   (one GPU per rank, N = 1..8, one node)\n"
      "\n"
      "Times ferry's EP dispatch (bf16, fp8) and combine (bf16) in both modes against an NCCL\n"
      "ncclSend/ncclRecv all-to-all moving the same bytes between every pair of ranks.\n"
      "Iterations of (dispatch, combine), G per CUDA graph, an event around each op; per op the\n"
      "median over iterations, max over ranks. GB/s (DeepEP's convention): token payload the\n"
      "busiest rank receives, its own tokens included (a token once per destination rank), / t;\n"
      "NVL GB/s: the same without its own tokens. fp8 token = H + H/128*4 bytes (scales).\n"
      "Reference problems: ht 4096 tokens/rank, ll 128; hidden 7168, top-8 of 256 experts.\n"
      "\n"
      "  --mode M             ht, ll or both (default both)\n"
      "  --tokens LIST        tokens per rank (default 4096 for ht, 128 for ll), e.g. 1024,4096\n"
      "  --hidden H           hidden size, a multiple of 128 (default 7168)\n"
      "  --topk K             experts per token (default 8)\n"
      "  --experts E          experts in all, divisible by N (default 256)\n"
      "  --sms LIST           SMs the EP kernels may use, 0 = all (default 24 for ht, 0 for ll)\n"
      "  --dispatch-types L   bf16, fp8 (default both; ht fp8 dispatches tokens quantized beforehand,\n"
      "                       ll fp8 quantizes bf16 tokens in the kernel, as DeepEP's benchmarks do)\n"
      "  --ht-quantize        ht fp8 quantizes bf16 tokens in the kernel too (rows \"fp8q\"; the same\n"
      "                       fp8 rows and scales arrive, so NCCL moves the same bytes)\n"
      "  --expert-pass        between dispatch and combine, rewrite in place every expert-output row the\n"
      "                       combine reads, as the expert GEMM would (its own step, in neither figure)\n"
      "  --layout L           expanded, rank_rows or both (default both; ll: expanded only): one row\n"
      "                       per (token, local expert), or one per (token, source rank); rank rows run\n"
      "                       inside one node (the default leaves them out across nodes)\n"
      "  --own-rows-first     rank rows with EpConfig::own_rows_first (this rank's every token first,\n"
      "                       written by the copy engine where nothing is quantized; rows rank_rows_own)\n"
      "  --zero-copy          rank rows with EpConfig::zero_copy_combine: the expert outputs are written\n"
      "                       into EpBuffer::combine_input(), where the peers read them (rows rank_rows_zc;\n"
      "                       with --own-rows-first rank_rows_own_zc)\n"
      "  --skew X             0: uniform random routing (default); X > 0: expert of popularity rank p\n"
      "                       drawn with weight 1/(p+1)^X (popularity: a random order of the experts)\n"
      "  --seed S             routing and token seed (default 1)\n"
      "  --iters N            timed iterations per case (default: 100..2000, ~0.2 s per case)\n"
      "  --warmup N           warm-up iterations per case (default 20)\n"
      "  --graph-iters G      (dispatch, combine) iterations per CUDA graph (default 10)\n"
      "  --no-graph           launch directly instead of replaying a graph\n"
      "  --csv PATH           CSV of every row (default ferry_ep.csv; '' for none)\n"
      "  --no-nccl            skip the NCCL baseline\n"
      "  --aligned            before every timed op (ferry's and NCCL's), an untimed ferry AllReduce\n"
      "                       of 256 floats, so every rank starts the op together (NOTE [EP bench:\n"
      "                       aligned ops], ep_align.hpp); without it, ranks that drift out of phase\n"
      "                       over a slow network count the peer's lead in their ops' times (--halves\n"
      "                       stay unaligned)\n"
      "  --halves             also time dispatch_send, dispatch_recv, combine_send, combine_recv one\n"
      "                       after another (no overlap), and dispatch_send reusing the layout\n"
      "  --route-ahead        also time EpBuffer::route, then dispatch() reusing its layout, then\n"
      "                       combine: the dispatch with its routing layout made ahead (as DeepEP's\n"
      "                       get_dispatch_layout, which its dispatch timing leaves out)\n"
      "  --stages             also time the halves one by one, each receive half started after\n"
      "                       every rank's send half finished and 20 ms more (--stages-settle-us US):\n"
      "                       its local work without the wait for the data (with --halves: the wait\n"
      "                       is the difference); eager launches, for cross-node splits\n"
      "  --check              verify each case, after an eager round and again after the timed ones:\n"
      "                       per local expert the row count, every row (ordered by source rank, then\n"
      "                       token) against the regenerated source token (bf16 exact, fp8 within its\n"
      "                       rounding) and its weight; then combine of rows scaled per expert\n"
      "                       (2^(e%%4-1)) against an fp32 host reference. Exit 1 on a mismatch\n"
      "  --help               this text\n"
      "\n"
      "Environment: NCCL_NVLS_ENABLE must be 0 (set to 0 when unset; NVLink multicast stays off).\n");
}

}  // namespace ferry::bench
