// ferry-bench allreduce: every ferry AllReduce algorithm against NCCL, on the same
// communicator size, stream and buffers, timed in CUDA graph replay (DESIGN.md,
// "How performance is reported").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_timing.hpp"
#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace ferry::bench {
namespace {

constexpr size_t kDefaultMinBytes = size_t{4} << 10;
constexpr size_t kDefaultMaxBytes = size_t{256} << 20;
constexpr uint64_t kDataSeed = 0x5eedf00dULL;

struct Options {
  std::vector<size_t> sizes;
  std::vector<DataType> dtypes{DataType::kBFloat16, DataType::kFloat32};
  std::vector<AllReduceAlgorithm> algorithms{AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kOneShot,
                                             AllReduceAlgorithm::kTwoShot, AllReduceAlgorithm::kRing,
                                             AllReduceAlgorithm::kRecursiveDoubling,
                                             AllReduceAlgorithm::kHierarchical};
  int timed_replays = 0;  // 0: automatic
  int warmup_replays = 5;
  int graph_ops = 0;      // 0: by size
  std::string csv_path = "ferry_allreduce.csv";
  bool use_nccl = true;
  bool check = false;
};

const char* short_dtype_name(DataType type) {
  switch (type) {
    case DataType::kBFloat16: return "bf16";
    case DataType::kFloat16: return "fp16";
    case DataType::kFloat32: return "fp32";
    default: return dtype_name(type);
  }
}

Options parse_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  Options options;
  size_t min_bytes = kDefaultMinBytes;
  size_t max_bytes = kDefaultMaxBytes;
  if (auto v = parser.take_value("--min-bytes")) min_bytes = parse_byte_size(*v);
  if (auto v = parser.take_value("--max-bytes")) max_bytes = parse_byte_size(*v);
  int step_factor = 2;
  if (auto v = parser.take_value("--step-factor")) step_factor = parse_positive_int("--step-factor", *v);
  if (auto v = parser.take_value("--sizes")) {
    for (const std::string& item : split_list(*v)) options.sizes.push_back(parse_byte_size(item));
    if (options.sizes.empty()) throw UsageError("--sizes needs at least one size");
    std::sort(options.sizes.begin(), options.sizes.end());
    options.sizes.erase(std::unique(options.sizes.begin(), options.sizes.end()), options.sizes.end());
  } else {
    if (min_bytes > max_bytes) throw UsageError("--min-bytes is larger than --max-bytes");
    if (step_factor < 2) throw UsageError("--step-factor must be >= 2");
    for (size_t b = min_bytes; b <= max_bytes; b *= static_cast<size_t>(step_factor)) options.sizes.push_back(b);
  }
  if (auto v = parser.take_value("--dtypes")) {
    options.dtypes.clear();
    for (const std::string& item : split_list(*v)) {
      DataType type;
      try {
        type = dtype_from_string(item);
      } catch (const ferry::InvalidArgument&) {
        throw UsageError("unknown dtype '" + item + "' (expected bf16, fp16, fp32)");
      }
      if (type != DataType::kBFloat16 && type != DataType::kFloat16 && type != DataType::kFloat32) {
        throw UsageError("dtype '" + item + "' is not benchmarked (expected bf16, fp16, fp32)");
      }
      options.dtypes.push_back(type);
    }
    if (options.dtypes.empty()) throw UsageError("--dtypes needs at least one dtype");
  }
  if (auto v = parser.take_value("--algos")) {
    options.algorithms.clear();
    for (const std::string& item : split_list(*v)) {
      try {
        options.algorithms.push_back(algorithm_from_string(item));
      } catch (const ferry::InvalidArgument&) {
        throw UsageError("unknown algorithm '" + item +
                         "' (expected auto, one_shot, two_shot, ring, recursive_doubling, hierarchical)");
      }
    }
  }
  if (auto v = parser.take_value("--iters")) options.timed_replays = parse_positive_int("--iters", *v);
  if (auto v = parser.take_value("--warmup")) options.warmup_replays = parse_positive_int("--warmup", *v);
  if (auto v = parser.take_value("--graph-ops")) options.graph_ops = parse_positive_int("--graph-ops", *v);
  if (auto v = parser.take_value("--csv")) options.csv_path = *v;
  options.use_nccl = !parser.take_flag("--no-nccl");
  options.check = parser.take_flag("--check");
  parser.finish();
  return options;
}

// G calls per graph: many for small sizes, where launch gaps and rank skew would
// otherwise dominate one call; one from 16 MB up, where a call takes milliseconds.
int graph_ops_for(size_t bytes, const Options& options) {
  if (options.graph_ops > 0) return options.graph_ops;
  return static_cast<int>(std::clamp<size_t>((size_t{16} << 20) / bytes, 1, 10));
}

// ------------------------------------------------------------------ test data
// Small integers keep every partial sum exact in bf16, fp16 and fp32, so results
// can be compared bit for bit whatever order an algorithm adds in.

int value_range(int world_size) { return std::clamp(256 / std::max(world_size, 1), 1, 8); }

int element_value(int rank, size_t index, int range) {
  uint64_t z = kDataSeed + (static_cast<uint64_t>(rank) << 40) + index;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<int>(z % static_cast<uint64_t>(2 * range + 1)) - range;
}

// Fills this rank's input (count elements) and, when checking, the expected sum.
void fill_input(DataType type, size_t count, int rank, int world_size, void* device_in,
                std::vector<float>* expected) {
  const int range = value_range(world_size);
  std::vector<uint8_t> host(count * dtype_size(type));
  for (size_t i = 0; i < count; ++i) store_small_int(type, host.data(), i, element_value(rank, i, range));
  FERRY_CUDA_CHECK(cudaMemcpy(device_in, host.data(), host.size(), cudaMemcpyHostToDevice));
  if (expected == nullptr) return;
  expected->assign(count, 0.0f);
  for (int r = 0; r < world_size; ++r) {
    for (size_t i = 0; i < count; ++i) (*expected)[i] += static_cast<float>(element_value(r, i, range));
  }
}

struct CheckRecord {
  int64_t mismatches = 0;
  int64_t first_index = -1;
  float got = 0;
  float expected = 0;
};

// Compares the output with the expected sum on every rank; rank 0 reports.
// Returns true when every rank matched.
bool verify_output(const void* device_out, size_t count, DataType type, const std::vector<float>& expected,
                   Bootstrap& bootstrap, const std::string& case_name, const char* stage) {
  std::vector<uint8_t> host(count * dtype_size(type));
  FERRY_CUDA_CHECK(cudaMemcpy(host.data(), device_out, host.size(), cudaMemcpyDeviceToHost));
  CheckRecord mine;
  for (size_t i = 0; i < count; ++i) {
    const float got = load_as_float(type, host.data(), i);
    if (got == expected[i]) continue;  // NaN (the poison) never compares equal
    if (mine.mismatches++ == 0) mine = {1, static_cast<int64_t>(i), got, expected[i]};
  }
  const std::vector<CheckRecord> all = bootstrap.all_gather_value(mine);
  bool ok = true;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].mismatches == 0) continue;
    ok = false;
    if (bootstrap.rank() == 0) {
      std::printf("CHECK FAILED %s (%s): rank %zu: %lld of %zu elements wrong, first at %lld: got %g, expected %g\n",
                  case_name.c_str(), stage, r, static_cast<long long>(all[r].mismatches), count,
                  static_cast<long long>(all[r].first_index), all[r].got, all[r].expected);
    }
  }
  return ok;
}

// ------------------------------------------------------------------ NCCL baseline
// The communicator, FERRY_BENCH_NCCL_CHECK and the version string are in bench_common.

#if FERRY_BENCH_HAVE_NCCL
ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat16: return ncclFloat16;
    default: return ncclFloat32;
  }
}
#endif

// ------------------------------------------------------------------ cases

// One column group of the table: a ferry algorithm, or NCCL (no algorithm).
struct Contender {
  std::string label;  // algorithm_name(), or "nccl"
  std::optional<AllReduceAlgorithm> algorithm;
  bool is_nccl() const { return !algorithm.has_value(); }
};

// Keeps the table narrow; the CSV has the full names.
std::string table_label(const std::string& name) { return name == "recursive_doubling" ? "rec_doubling" : name; }

struct Measurement {
  double op_us = 0;
  bool check_failed = false;
};

double busbw_gbps(size_t bytes, double op_us, int world_size) {
  return static_cast<double>(bytes) / (op_us * 1e3) * 2.0 * (world_size - 1) / world_size;
}

}  // namespace

void print_allreduce_usage(std::FILE* out) {
  std::fprintf(out,
      "usage: mpirun -np N ferry-bench allreduce [options]   (one GPU per rank)\n"
      "\n"
      "Times ferry's AllReduce algorithms and NCCL in CUDA graph replay: G calls per graph,\n"
      "per-op time = replay time / G, median over replays, max over ranks;\n"
      "busbw = bytes / t * 2(n-1)/n (nccl-tests).\n"
      "\n"
      "  --min-bytes B      smallest size (default 4K); K/M/G suffixes accepted\n"
      "  --max-bytes B      largest size (default 256M)\n"
      "  --step-factor F    size multiplier between steps (default 2)\n"
      "  --sizes a,b,c      explicit sizes instead of the min..max sweep (e.g. 8K,1M,64M)\n"
      "  --dtypes LIST      bf16, fp16, fp32 (default bf16,fp32)\n"
      "  --algos LIST       auto, one_shot, two_shot, ring, recursive_doubling, hierarchical\n"
      "                     (default: all the communicator supports)\n"
      "  --iters N          timed graph replays per case (default: 20..300, ~0.1 s per case)\n"
      "  --warmup N         warm-up graph replays per case (default 5)\n"
      "  --graph-ops G      calls per graph (default 10 up to 1.6M, down to 1 at 16M+)\n"
      "  --csv PATH         CSV of every measurement (default ferry_allreduce.csv; '' for none)\n"
      "  --no-nccl          skip the NCCL baseline\n"
      "  --check            verify each case (eager call, then after graph replays) against\n"
      "                     the exact sum of random small integers; exit 1 on a mismatch\n"
      "  --help             this text\n"
      "\n"
      "Environment: NCCL_NVLS_ENABLE must be 0 (set to 0 when unset; NVLink multicast stays off).\n");
}

int run_allreduce_bench(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const Options options = parse_options(std::move(args));
  const int rank = bootstrap->rank();
  const bool leader = rank == 0;
  start_gpu_subcommand(*bootstrap);  // a clear message, not a failed job, without GPUs

  Communicator comm(bootstrap);
  FERRY_CUDA_CHECK(cudaSetDevice(comm.device()));
  const int world_size = comm.size();
  const size_t max_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  AllReduce allreduce(comm, max_bytes);

  std::vector<Contender> contenders;
  for (AllReduceAlgorithm algorithm : options.algorithms) {
    if (!allreduce.supports(algorithm)) {
      if (leader) std::printf("note: skipping %s (not supported on %d ranks)\n", algorithm_name(algorithm), world_size);
      continue;
    }
    contenders.push_back({algorithm_name(algorithm), algorithm});
  }
  bool use_nccl = options.use_nccl;
#if FERRY_BENCH_HAVE_NCCL
  std::optional<NcclCommunicator> nccl;
  if (use_nccl) {
    nccl.emplace(*bootstrap);
    contenders.push_back({"nccl", std::nullopt});
  }
#else
  if (use_nccl && leader) std::printf("note: built without NCCL; no baseline\n");
  use_nccl = false;
#endif

  CudaStream stream;
  DeviceBuffer input(max_bytes);
  DeviceBuffer output(max_bytes);
  std::optional<CsvWriter> csv;
  if (leader && !options.csv_path.empty()) {
    csv.emplace(options.csv_path, std::vector<std::string>{"op", "dtype", "bytes", "world_size", "impl", "algorithm",
                                                           "time_us", "busbw_gbps", "speedup_vs_nccl"});
  }

  // Header: what runs, where, and how it is timed.
  if (leader) {
    cudaDeviceProp prop{};
    FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, comm.device()));
    std::string names;
    for (const Contender& c : contenders) {
      if (!names.empty()) names += ',';
      names += c.label;
    }
    std::printf("ferry-bench allreduce: %d ranks, %s", world_size, prop.name);
#if FERRY_BENCH_HAVE_NCCL
    if (use_nccl) std::printf(", NCCL %s", nccl_library_version().c_str());
#endif
    std::printf("\n  %zu sizes %s..%s, contenders %s\n", options.sizes.size(),
                format_byte_size(options.sizes.front()).c_str(), format_byte_size(options.sizes.back()).c_str(),
                names.c_str());
    std::printf("  time: CUDA graph of G calls, per-op = replay / G, median over replays, max over ranks (us);\n"
                "  GB/s: busbw = bytes/t*2(n-1)/n; x: NCCL time / ferry time;\n"
                "  '!': failed check (left out of best and of the CSV)\n\n");
  }

  std::vector<TablePrinter::Column> columns{{"", "dtype", 5, true}, {"", "bytes", 6}};
  for (const Contender& c : contenders) {
    columns.push_back({table_label(c.label), "us", 8});
    columns.push_back({table_label(c.label), "GB/s", 6});
  }
  columns.push_back({"best ferry", "algo", 12, true});
  columns.push_back({"best ferry", "x", 6});
  columns.push_back({"auto", "picks", 12, true});
  columns.push_back({"auto", "x", 6});
  const TablePrinter table(columns);
  if (leader) table.print_header();
  // "best ferry" is the best explicit algorithm (auto runs one of them); auto only when alone.
  const bool has_explicit = std::any_of(contenders.begin(), contenders.end(), [](const Contender& c) {
    return !c.is_nccl() && c.algorithm != AllReduceAlgorithm::kAuto;
  });

  bool all_checks_passed = true;
  std::vector<float> expected;
  for (DataType type : options.dtypes) {
    const size_t elem = dtype_size(type);
    fill_input(type, max_bytes / elem, rank, world_size, input.get(), options.check ? &expected : nullptr);
    for (size_t bytes : options.sizes) {
      if (bytes % elem != 0) {
        if (leader) std::printf("note: skipping %zu bytes for %s (not a whole number of elements)\n", bytes,
                                short_dtype_name(type));
        continue;
      }
      const size_t count = bytes / elem;
      TimingOptions timing;
      timing.ops_per_graph = graph_ops_for(bytes, options);
      timing.warmup_replays = options.warmup_replays;
      timing.timed_replays = options.timed_replays;

      std::map<std::string, Measurement> row;
      for (const Contender& contender : contenders) {
        const std::string case_name = std::string(short_dtype_name(type)) + " " + format_byte_size(bytes) + " " +
                                      (contender.is_nccl() ? "nccl" : "ferry/" + contender.label);
        TimedOp op;
        op.name = case_name;
        if (contender.is_nccl()) {
#if FERRY_BENCH_HAVE_NCCL
          op.enqueue = [&](cudaStream_t s) {
            FERRY_BENCH_NCCL_CHECK(ncclAllReduce(input.get(), output.get(), count, nccl_type(type), ncclSum, nccl->get(), s));
          };
#endif
        } else {
          const AllReduceAlgorithm algorithm = *contender.algorithm;
          op.enqueue = [&, algorithm](cudaStream_t s) {
            allreduce.run(input.get(), output.get(), count, type, ReduceOp::kSum, s, algorithm);
          };
          op.synchronize = [&](cudaStream_t s) { comm.synchronize(s); };  // surfaces device timeouts
        }
        auto sync = [&] {
          if (op.synchronize) op.synchronize(stream.get());
          else FERRY_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
        };
        // NaN in every dtype: an element the op never writes cannot pass the check.
        auto poison_output = [&] { FERRY_CUDA_CHECK(cudaMemsetAsync(output.get(), 0xff, bytes, stream.get())); };

        bootstrap->barrier();  // cases start together
        Measurement m;
        try {
          if (options.check) {
            poison_output();
            op.enqueue(stream.get());
            sync();
            m.check_failed |= !verify_output(output.get(), count, type, expected, *bootstrap, case_name, "eager call");
            poison_output();  // the graph replays must write the output themselves
          }
          m.op_us = time_op(op, stream.get(), *bootstrap, timing).op_us;
          if (options.check) {
            m.check_failed |= !verify_output(output.get(), count, type, expected, *bootstrap, case_name, "graph replay");
          }
        } catch (const ferry::NotSupported& e) {  // argument checks: the same on every rank
          if (leader) std::printf("note: %s skipped: %s\n", case_name.c_str(), e.what());
          continue;
        } catch (const ferry::InvalidArgument& e) {
          if (leader) std::printf("note: %s skipped: %s\n", case_name.c_str(), e.what());
          continue;
        }
        all_checks_passed &= !m.check_failed;
        row[contender.label] = m;
      }
      if (!leader) continue;

      // Table row and CSV rows (rank 0; times are already the max over ranks).
      const auto nccl_it = row.find("nccl");
      auto speedup = [&](double op_us) -> std::optional<double> {
        if (nccl_it == row.end()) return std::nullopt;
        return nccl_it->second.op_us / op_us;
      };
      auto speedup_cell = [&](double op_us) {
        const auto x = speedup(op_us);
        return x ? format_fixed(*x, 2) : std::string("-");
      };
      std::vector<std::string> cells{short_dtype_name(type), format_byte_size(bytes)};
      std::optional<std::pair<std::string, double>> best;
      for (const Contender& c : contenders) {
        const auto it = row.find(c.label);
        if (it == row.end()) {
          cells.insert(cells.end(), {"-", "-"});
          continue;
        }
        const Measurement& m = it->second;
        const double busbw = busbw_gbps(bytes, m.op_us, world_size);
        cells.push_back(format_fixed(m.op_us, m.op_us < 1000 ? 1 : 0) + (m.check_failed ? "!" : ""));
        cells.push_back(format_fixed(busbw, 1));
        if (!c.is_nccl() && !m.check_failed && (!best || m.op_us < best->second) &&
            (c.algorithm != AllReduceAlgorithm::kAuto || !has_explicit)) {
          best = std::make_pair(c.label, m.op_us);
        }
        if (csv && !m.check_failed) {  // a wrong result is not a measurement
          const auto x = speedup(m.op_us);
          csv->write_row({"allreduce", short_dtype_name(type), std::to_string(bytes), std::to_string(world_size),
                          c.is_nccl() ? "nccl" : "ferry", c.is_nccl() ? "default" : c.label,
                          format_fixed(m.op_us, 3), format_fixed(busbw, 3), x ? format_fixed(*x, 3) : ""});
        }
      }
      cells.push_back(best ? table_label(best->first) : "-");
      cells.push_back(best ? speedup_cell(best->second) : "-");
      const auto auto_it = row.find(algorithm_name(AllReduceAlgorithm::kAuto));
      cells.push_back(table_label(algorithm_name(allreduce.select(bytes))));
      cells.push_back(auto_it == row.end() ? "-"
                                           : speedup_cell(auto_it->second.op_us) + (auto_it->second.check_failed ? "!" : ""));
      table.print_row(cells);
    }
  }
  if (leader) {
    if (csv) std::printf("\nwrote %s\n", csv->path().c_str());
    if (options.check) std::printf("check: %s\n", all_checks_passed ? "all cases match" : "MISMATCHES (see above)");
  }
  return all_checks_passed ? 0 : 1;
}

}  // namespace ferry::bench
