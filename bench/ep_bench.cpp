// ferry-bench ep: EP dispatch and combine in both modes (high-throughput: prefill
// sizes; low-latency: decode sizes) against an NCCL send/recv all-to-all that moves
// the same payload, in the same run, on the same stream (DESIGN.md, "How
// performance is reported").
//
// Bandwidth follows DeepEP's convention so the numbers compare: the token payload a
// rank receives (its own tokens included; a token counted once per destination
// rank, however many of its experts live there) over the time. "NVL" leaves out the
// tokens a rank sends to itself. Combine moves the same tokens back, in bf16.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ep_align.hpp"
#include "ep_check.hpp"
#include "ep_expert_pass.hpp"
#include "ep_nccl.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace ferry::bench {
using namespace ep_detail;  // the pieces the EP bench's files share (ep_check.hpp, ep_nccl.hpp)

namespace {

constexpr int kDefaultHtTokens = 4096;
constexpr int kDefaultLlTokens = 128;
constexpr int kDefaultHtSms = 24;
constexpr int kDefaultLlSms = 0;  // all

const char* mode_label(EpMode mode) { return mode == EpMode::kHighThroughput ? "ht" : "ll"; }
const char* type_label(DataType type) { return type == DataType::kFloat8E4M3 ? "fp8" : "bf16"; }

// High-throughput fp8 dispatches tokens quantized beforehand (DeepEP's convention), unless --ht-quantize asks
// for bf16 tokens quantized in the kernel, as low latency always does.
bool quantizes_in_kernel(const Options& options, EpMode mode, DataType type) {
  return type == DataType::kFloat8E4M3 && (mode == EpMode::kLowLatency || options.ht_quantize);
}

// A dispatch type as rows name it: "fp8q" where high throughput quantizes in the kernel.
std::string dispatch_label(const Options& options, EpMode mode, DataType type) {
  return std::string(type_label(type)) +
         (mode == EpMode::kHighThroughput && quantizes_in_kernel(options, mode, type) ? "q" : "");
}

// ------------------------------------------------------------------ ferry

struct FerryMeasurement {
  double dispatch_us = 0;
  double combine_us = 0;
  double dispatch_routed_us = 0;   // --route-ahead: dispatch() reusing that layout
  bool used_graph = true;
  bool check_failed = false;
};

FerryMeasurement measure_ferry(Communicator& comm, const Options& options, const CaseInputs& in, EpMode mode,
                               EpLayout layout, DataType type, int sms, cudaStream_t stream,
                               const std::string& case_name, const std::function<void(cudaStream_t)>& before_each) {
  Bootstrap& bootstrap = comm.bootstrap();
  const int64_t T = in.tokens;
  const int64_t H = options.hidden;
  EpConfig config;
  config.max_tokens_per_rank = in.tokens;
  config.hidden = options.hidden;
  config.topk = options.topk;
  config.num_experts = options.experts;
  config.dispatch_type = type;
  config.with_weights = true;
  config.num_sms = sms;
  config.mode = mode;
  config.layout = layout;
  const bool rank_rows = layout == EpLayout::kRankRows;
  config.own_rows_first = rank_rows && options.own_rows_first;
  config.zero_copy_combine = rank_rows && options.zero_copy;
  // The rows this routing needs on the busiest rank (the same on every rank, as the
  // symmetric allocations require) instead of the worst case; own rows first: all
  // T own tokens are rows (at most T more).
  if (mode == EpMode::kHighThroughput)
    config.max_recv_rows = std::max<int64_t>(
        1, rank_rows ? in.traffic.max_recv_tokens() + (config.own_rows_first ? T : 0) : in.traffic.max_recv_rows());
  EpBuffer ep(comm, config);

  // DeepEP's conventions: high-throughput fp8 dispatches tokens quantized beforehand
  // (with their scales); low-latency fp8 quantizes bf16 tokens in the kernel (quantizes_in_kernel).
  const bool fp8_input = type == DataType::kFloat8E4M3 && !quantizes_in_kernel(options, mode, type);
  const TensorView tokens = fp8_input ? TensorView(in.x_fp8->get(), DataType::kFloat8E4M3, {T, H})
                                      : TensorView(in.x_bf16->get(), DataType::kBFloat16, {T, H});
  const TensorView scales =
      fp8_input ? TensorView(in.x_scales->get(), DataType::kFloat32, {T, H / kScaleBlock}) : TensorView();
  const TensorView topk_idx(in.topk_idx->get(), DataType::kInt64, {T, options.topk});
  const TensorView topk_weights(in.topk_weights->get(), DataType::kFloat32, {T, options.topk});
  DeviceBuffer out(static_cast<size_t>(T * H) * 2);
  const TensorView out_view(out.get(), DataType::kBFloat16, {T, H});

  // One eager round: argument errors surface here, and it sizes the expert outputs. Zero-copy combine: they
  // live in the buffer's combine_input(), where the peers read them (the combine accepts no other tensor).
  const DispatchResult first = ep.dispatch(tokens, topk_idx, topk_weights, scales, stream);
  std::optional<DeviceBuffer> expert_storage;
  TensorView expert_view;
  if (config.zero_copy_combine) {
    expert_view = ep.combine_input();
  } else {
    expert_storage.emplace(static_cast<size_t>(std::max<int64_t>(first.capacity_rows, 1) * H) * 2);
    expert_view =
        mode == EpMode::kHighThroughput
            ? TensorView(expert_storage->get(), DataType::kBFloat16, {first.capacity_rows, H})
            : TensorView(expert_storage->get(), DataType::kBFloat16,
                         {first.local_experts, first.capacity_per_expert, H});
  }
  void* const expert_outputs = const_cast<void*>(expert_view.data);  // written by --check and --expert-pass
  FERRY_CUDA_CHECK(cudaMemsetAsync(expert_outputs, 0, static_cast<size_t>(expert_view.numel()) * 2, stream));
  ep.combine(expert_view, first.handle, out_view, stream);
  comm.synchronize(stream);

  FerryMeasurement m;
  const CheckContext check{options, in, comm.rank(), comm.size(), ep.local_experts(), mode, type};
  auto poison_out = [&] { FERRY_CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream)); };  // NaN
  if (options.check) {
    const CheckRecord dispatched = rank_rows ? check_dispatch_rank_rows(check, first, expert_outputs)
                                             : check_dispatch(check, first, expert_outputs);
    m.check_failed |= !report_check(bootstrap, dispatched, case_name, "dispatch");
    poison_out();
    ep.combine(expert_view, first.handle, out_view, stream);
    comm.synchronize(stream);
    m.check_failed |= !report_check(bootstrap, check_combine(check, out.get()), case_name, "combine");
    poison_out();  // the timed iterations must write it themselves
  }

  // Timed: iterations of (dispatch, combine); high-throughput without the host
  // synchronization on the row counts, so both modes can be graph-captured.
  DispatchOptions no_sync;
  no_sync.sync_counts = false;
  DispatchResult last = first;
  TimedSequence sequence;
  sequence.name = case_name;
  sequence.steps = {
      [&](cudaStream_t s) { last = ep.dispatch(tokens, topk_idx, topk_weights, scales, s, no_sync); },
      [&](cudaStream_t s) { ep.combine(expert_view, last.handle, out_view, s); },
  };
  if (options.expert_pass)  // between the two, timed apart (ep_expert_pass.cu)
    sequence.steps.insert(sequence.steps.begin() + 1, [&](cudaStream_t s) {
      launch_expert_pass(last, layout, comm.size(), expert_outputs, options.hidden, s);
    });
  sequence.synchronize = [&](cudaStream_t s) { comm.synchronize(s); };  // surfaces device timeouts
  sequence.before_each = before_each;  // --aligned (NOTE [EP bench: aligned ops])
  const SequenceTimingResult timed = time_sequence(sequence, stream, bootstrap, timing_options(options));
  m.dispatch_us = timed.step_us[0];
  m.combine_us = timed.step_us.back();
  m.used_graph = timed.used_graph;

  if (options.halves) {
    // The halves one after another on one stream (no overlap): where the time goes.
    EpHandle handle;
    TimedSequence halves;
    halves.name = case_name + " halves";
    halves.steps = {
        [&](cudaStream_t s) { handle = ep.dispatch_send(tokens, topk_idx, topk_weights, scales, s, no_sync); },
        [&](cudaStream_t s) { last = ep.dispatch_recv(handle, s, no_sync); },
        [&](cudaStream_t s) { ep.combine_send(expert_view, last.handle, s); },
        [&](cudaStream_t s) { ep.combine_recv(last.handle, out_view, s); },
        [&](cudaStream_t s) {  // the same routing again: no layout step
          DispatchOptions reuse = no_sync;
          reuse.reuse = &handle;
          handle = ep.dispatch_send(tokens, TensorView(), topk_weights, scales, s, reuse);
        },
        [&](cudaStream_t s) { last = ep.dispatch_recv(handle, s, no_sync); },
    };
    halves.synchronize = sequence.synchronize;  // not aligned: an AllReduce before a receive half would hide
                                                // the transfer it waits for (session 45 c5)
    const SequenceTimingResult h = time_sequence(halves, stream, bootstrap, timing_options(options));
    if (bootstrap.rank() == 0)
      std::printf("  %s halves (us): dispatch_send %.1f  dispatch_recv %.1f  combine_send %.1f  combine_recv %.1f"
                  "  dispatch_send reusing the layout %.1f\n",
                  case_name.c_str(), h.step_us[0], h.step_us[1], h.step_us[2], h.step_us[3], h.step_us[4]);
  }

  if (options.route_ahead) {
    // The layout made ahead (EpBuffer::route), then the dispatch reusing it: each timed alone.
    EpHandle routed;
    TimedSequence ahead;
    ahead.name = case_name + " route ahead";
    ahead.steps = {
        [&](cudaStream_t s) { routed = ep.route(topk_idx, s); },
        [&](cudaStream_t s) {
          DispatchOptions reuse = no_sync;
          reuse.reuse = &routed;
          last = ep.dispatch(tokens, TensorView(), topk_weights, scales, s, reuse);
        },
        [&](cudaStream_t s) { ep.combine(expert_view, last.handle, out_view, s); },
    };
    ahead.synchronize = sequence.synchronize;
    ahead.before_each = before_each;
    const SequenceTimingResult r = time_sequence(ahead, stream, bootstrap, timing_options(options));
    m.dispatch_routed_us = r.step_us[1];
    if (bootstrap.rank() == 0)
      std::printf("  %s route ahead (us): route %.1f  dispatch reusing it %.1f  combine %.1f\n", case_name.c_str(),
                  r.step_us[0], r.step_us[1], r.step_us[2]);
  }

  if (options.stages_settle_us > 0) {
    const StageTimes st = time_ep_stages({ep, tokens, topk_idx, topk_weights, scales, expert_view, out_view, comm},
                                         options, bootstrap, stream);
    if (bootstrap.rank() == 0) {
      std::printf("  %s stages (us, each receive half after its data landed, settle %d us): dispatch_send %.1f  "
                  "dispatch_recv %.1f  combine_send %.1f  combine_recv %.1f\n",
                  case_name.c_str(), options.stages_settle_us, st.dispatch_send, st.dispatch_recv_landed,
                  st.combine_send, st.combine_recv_landed);
      if (st.proxy)
        std::printf("  %s rank 0's proxy per (dispatch, combine): %.1f descriptors, %.1f puts, issue %.1f us, "
                    "%.1f us per request to complete (times: FERRY_PROXY_STATS=1)\n",
                    case_name.c_str(), st.proxy_descriptors, st.proxy_puts, st.proxy_issue_us,
                    st.proxy_done_us_per_request);
    }
  }

  if (options.check) {
    const CheckRecord dispatched =
        rank_rows ? check_dispatch_rank_rows(check, last, nullptr) : check_dispatch(check, last, nullptr);
    m.check_failed |= !report_check(bootstrap, dispatched, case_name, "dispatch, timed");
    m.check_failed |= !report_check(bootstrap, check_combine(check, out.get()), case_name, "combine, timed");
  }
  return m;
}

// ------------------------------------------------------------------ report

struct Row {
  std::string op;      // "dispatch bf16", "dispatch fp8", "combine bf16"
  size_t token_bytes;  // payload of one token on the wire
  double ferry_us;
  bool used_graph;
  bool check_failed;
  std::optional<double> nccl_us;
};

double gbps(int64_t tokens, size_t token_bytes, double us) {
  return static_cast<double>(tokens) * static_cast<double>(token_bytes) / (us * 1e3);
}

}  // namespace

int run_ep_bench(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options options = parse_ep_options(std::move(args));
  const int rank = bootstrap->rank();
  const int world = bootstrap->size();
  const bool leader = rank == 0;
  if (options.experts % world != 0) {
    throw UsageError("--experts " + std::to_string(options.experts) + " is not divisible by the world size " +
                     std::to_string(world) + " (each rank holds E / N experts)");
  }
  start_gpu_subcommand(*bootstrap);

  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int local_experts = options.experts / world;
  const Router router(options.experts, options.topk, options.skew, options.seed);

  bool use_nccl = options.use_nccl;
#if FERRY_BENCH_HAVE_NCCL
  std::optional<NcclCommunicator> nccl;
  if (use_nccl) nccl.emplace(*bootstrap);
#else
  if (use_nccl && leader) std::printf("note: built without NCCL; no baseline\n");
  use_nccl = false;
#endif

  CudaStream stream;
  std::optional<OpAligner> aligner;  // --aligned: NOTE [EP bench: aligned ops]
  if (options.aligned) aligner.emplace(comm);
  const std::function<void(cudaStream_t)> before_each =
      aligner ? aligner->step() : std::function<void(cudaStream_t)>();
  std::optional<CsvWriter> csv;
  if (leader && !options.csv_path.empty()) {
    csv.emplace(options.csv_path,
                std::vector<std::string>{"mode", "layout", "op", "world_size", "tokens", "hidden", "topk", "experts", "sms",
                                         "skew", "recv_tokens", "nvlink_tokens", "recv_rows", "recv_bytes",
                                         "nvlink_bytes", "ferry_us", "ferry_gbps", "ferry_nvlink_gbps", "nccl_us",
                                         "nccl_gbps", "speedup_vs_nccl", "graph"});
  }
  auto tokens_for = [&](EpMode mode) {
    if (!options.tokens.empty()) return options.tokens;
    return std::vector<int>{mode == EpMode::kHighThroughput ? kDefaultHtTokens : kDefaultLlTokens};
  };
  auto sms_for = [&](EpMode mode) {
    if (!options.sms.empty()) return options.sms;
    return std::vector<int>{mode == EpMode::kHighThroughput ? kDefaultHtSms : kDefaultLlSms};
  };
  auto list = [](const std::vector<int>& values, int zero_as) {
    std::string text;
    for (int v : values) {
      if (!text.empty()) text += ',';
      text += std::to_string(v == 0 ? zero_as : v);
    }
    return text;
  };

  if (leader) {
    cudaDeviceProp prop{};
    FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, comm.device()));
    std::printf("ferry-bench ep: W=%d ranks (%d per node), %s", world, comm.local_size(), prop.name);
#if FERRY_BENCH_HAVE_NCCL
    if (use_nccl) std::printf(", NCCL %s", nccl_library_version().c_str());
#endif
    std::printf("\n  model: H=%d, top-%d of E=%d experts (%d per rank), routing %s (seed %llu)\n", options.hidden,
                options.topk, options.experts, local_experts,
                options.skew == 0 ? "uniform random" : ("skewed, exponent " + format_fixed(options.skew, 2)).c_str(),
                static_cast<unsigned long long>(options.seed));
    for (EpMode mode : options.modes) {
      std::printf("  %s: T=%s tokens/rank, SMs %s\n", mode_label(mode), list(tokens_for(mode), 0).c_str(),
                  list(sms_for(mode), comm.sm_budget()).c_str());
    }
    if (options.aligned)
      std::printf("  aligned: an untimed AllReduce before every op, so every rank starts it together\n");
    std::printf("  time: (dispatch, combine) iterations, %d per CUDA graph, event around each op, median over\n"
                "  iterations, max over ranks (us); recv: tokens the busiest rank receives, its own included;\n"
                "  GB/s: recv * bytes per token / t (DeepEP's convention); NVL: without its own tokens;\n"
                "  x: NCCL time / ferry time; '!': failed check; '*': not in a CUDA graph\n\n",
                options.graph_iters);
  }

  const TablePrinter table({{"", "mode", 4, true},
                            {"", "layout", 9, true},
                            {"", "op", 13, true},
                            {"", "tokens", 6},
                            {"", "SMs", 4},
                            {"", "recv", 7},
                            {"ferry", "us", 9},
                            {"ferry", "GB/s", 7},
                            {"ferry", "NVL GB/s", 8},
                            {"nccl all-to-all", "us", 9},
                            {"nccl all-to-all", "GB/s", 7},
                            {"", "x", 5}});
  if (leader) table.print_header();

  bool failed = false;
  bool noted_rank_rows = false;  // the note on rank rows across nodes, once
  for (EpMode mode : options.modes) {
    for (int tokens : tokens_for(mode)) {
      CaseInputs in;
      in.tokens = tokens;
      make_inputs(in, options, router, *bootstrap, local_experts);

      // The baseline does not depend on the SM count: measured once per dispatch type.
      std::vector<std::optional<NcclMeasurement>> nccl_results(options.dispatch_types.size());
#if FERRY_BENCH_HAVE_NCCL
      if (use_nccl) {
        const size_t bf16_bytes = bytes_per_token(DataType::kBFloat16, options.hidden);
        int64_t sent = 0;
        for (int dst = 0; dst < world; ++dst) sent += in.traffic.at(in.traffic.tokens, rank, dst);
        AllToAllBuffers buffers(static_cast<size_t>(sent) * bf16_bytes,
                                static_cast<size_t>(in.traffic.received(in.traffic.tokens, rank, true)) * bf16_bytes);
        for (size_t i = 0; i < options.dispatch_types.size(); ++i) {
          const std::string name = std::string(mode_label(mode)) + " T=" + std::to_string(tokens) + " nccl " +
                                   type_label(options.dispatch_types[i]);
          bootstrap->barrier();
          nccl_results[i] = measure_nccl(*nccl, *bootstrap, options, in, options.dispatch_types[i], buffers,
                                         stream.get(), name, before_each);
        }
      }
#endif

      for (int sms : sms_for(mode))
      for (EpLayout layout : options.layouts) {
        if (mode == EpMode::kLowLatency && layout != EpLayout::kExpanded) continue;  // rank rows: ht only
        // Rank rows run inside one node; by default they are left out across nodes (--layout
        // rank_rows still asks, and gets EpBuffer's NotSupported).
        if (layout == EpLayout::kRankRows && comm.topology().num_nodes > 1 && !options.layout_given) {
          if (leader && !noted_rank_rows) std::printf("note: skipping rank_rows (inside one node only; %d nodes)\n",
                                                      comm.topology().num_nodes);
          noted_rank_rows = true;
          continue;
        }
        // EpBuffer keeps to the communicator's SM budget (NOTE [SM budget]: less than
        // the GPU only where ranks share it).
        const int effective_sms = std::min(sms == 0 ? comm.sm_budget() : sms, comm.sm_budget());
        std::vector<Row> rows;
        std::optional<Row> combine;  // one combine row: from the bf16 buffer when there is one
        for (size_t i = 0; i < options.dispatch_types.size(); ++i) {
          const DataType type = options.dispatch_types[i];
          const std::string name = std::string(mode_label(mode)) + " " + layout_label(layout, options) + " " +
                                   dispatch_label(options, mode, type) + " T=" + std::to_string(tokens) +
                                   " SMs=" + std::to_string(sms);
          bootstrap->barrier();  // cases start together
          FerryMeasurement m;
          try {
            m = measure_ferry(comm, options, in, mode, layout, type, sms, stream.get(), name, before_each);
          } catch (const ferry::NotSupported& e) {  // argument checks: the same on every rank
            if (leader) std::printf("error: %s: %s\n", name.c_str(), e.what());
            failed = true;
            continue;
          } catch (const ferry::InvalidArgument& e) {
            if (leader) std::printf("error: %s: %s\n", name.c_str(), e.what());
            failed = true;
            continue;
          }
          failed |= m.check_failed;
          const auto& baseline = nccl_results[i];
          auto dispatch_row = [&](const char* suffix, double us) {
            rows.push_back({"dispatch " + dispatch_label(options, mode, type) + suffix,
                            bytes_per_token(type, options.hidden), us, m.used_graph, m.check_failed,
                            baseline ? std::optional<double>(baseline->forward_us) : std::nullopt});
          };
          dispatch_row("", m.dispatch_us);
          // The same dispatch, its layout made ahead by EpBuffer::route.
          if (options.route_ahead) dispatch_row(" routed", m.dispatch_routed_us);
          if (!combine || type == DataType::kBFloat16) {
            combine = Row{"combine bf16", bytes_per_token(DataType::kBFloat16, options.hidden), m.combine_us,
                          m.used_graph, m.check_failed,
                          baseline ? std::optional<double>(baseline->reverse_us) : std::nullopt};
          }
        }
        if (combine) rows.push_back(*combine);
        if (!leader) continue;

        const int64_t recv = in.traffic.max_recv_tokens();
        const int64_t nvlink = in.traffic.max_nvlink_tokens();
        for (const Row& row : rows) {
          const double bw = gbps(recv, row.token_bytes, row.ferry_us);
          const double nvl_bw = gbps(nvlink, row.token_bytes, row.ferry_us);
          const bool has_nccl = row.nccl_us.has_value();
          const double nccl_us = row.nccl_us.value_or(0.0);
          const double nccl_bw = has_nccl ? gbps(recv, row.token_bytes, nccl_us) : 0.0;
          const double speedup = has_nccl ? nccl_us / row.ferry_us : 0.0;
          std::string us = format_fixed(row.ferry_us, 1);
          if (row.check_failed) us += "!";
          if (!row.used_graph) us += "*";
          table.print_row({mode_label(mode), layout_label(layout, options), row.op, std::to_string(tokens), std::to_string(effective_sms),
                           std::to_string(recv), us, format_fixed(bw, 1), world > 1 ? format_fixed(nvl_bw, 1) : "-",
                           has_nccl ? format_fixed(nccl_us, 1) : "-", has_nccl ? format_fixed(nccl_bw, 1) : "-",
                           has_nccl ? format_fixed(speedup, 2) : "-"});
          if (csv && !row.check_failed) {  // a wrong result is not a measurement
            csv->write_row({mode_label(mode), layout_label(layout, options), row.op, std::to_string(world), std::to_string(tokens),
                            std::to_string(options.hidden), std::to_string(options.topk),
                            std::to_string(options.experts), std::to_string(effective_sms),
                            format_fixed(options.skew, 3), std::to_string(recv), std::to_string(nvlink),
                            std::to_string(layout == EpLayout::kRankRows ? recv : in.traffic.max_recv_rows()),
                            std::to_string(static_cast<size_t>(recv) * row.token_bytes),
                            std::to_string(static_cast<size_t>(nvlink) * row.token_bytes),
                            format_fixed(row.ferry_us, 3), format_fixed(bw, 3), format_fixed(nvl_bw, 3),
                            has_nccl ? format_fixed(nccl_us, 3) : "", has_nccl ? format_fixed(nccl_bw, 3) : "",
                            has_nccl ? format_fixed(speedup, 3) : "", row.used_graph ? "1" : "0"});
          }
        }
      }
    }
  }
  if (leader) {
    if (csv) std::printf("\nwrote %s\n", csv->path().c_str());
    if (options.check) std::printf("check: %s\n", failed ? "FAILURES (see above)" : "all cases match");
    if (failed) std::printf("ferry-bench ep: some cases failed (see above)\n");
  }
  return failed ? 1 : 0;
}

}  // namespace ferry::bench
