// ferry-bench: one command line for every benchmark, dispatched on argv[1].
// Each subcommand runs its cases against their baseline in the same MPI job.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  void (*print_usage)(std::FILE* out);
  int (*run)(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
};

// New subcommands go here.
constexpr Subcommand kSubcommands[] = {
    {"allreduce", "ferry AllReduce algorithms vs NCCL, latency and busbw per size",
     ferry::bench::print_allreduce_usage, ferry::bench::run_allreduce_bench},
    {"ep", "EP dispatch/combine (high-throughput, low-latency) vs an NCCL all-to-all",
     ferry::bench::print_ep_usage, ferry::bench::run_ep_bench},
    {"nvlink", "NVLink all-to-all GB/s by copy method and SM count (design probe)",
     ferry::bench::print_nvlink_usage, ferry::bench::run_nvlink_probe},
    {"pcie", "GPU <-> pinned host memory GB/s by copy method and SM count (design probe)",
     ferry::bench::print_pcie_usage, ferry::bench::run_pcie_probe},
    {"pcie-peer", "GPU loads of host memory another rank's GPU just wrote, against its own (design probe)",
     ferry::bench::print_pcie_peer_usage, ferry::bench::run_pcie_peer_probe},
    {"pcie-latency", "a host load's and a system fence's wait while other SMs store into host memory (design probe)",
     ferry::bench::print_pcie_latency_usage, ferry::bench::run_pcie_latency_probe},
    {"pcie-ce", "a box from each GPU to the next rank's GPU by copy engines through host memory (design probe)",
     ferry::bench::print_pcie_ce_usage, ferry::bench::run_pcie_ce_probe},
    {"ce-allreduce", "two-rank bf16 AllReduce moved by copy engine in flagged chunks (design probe)",
     ferry::bench::print_ce_allreduce_usage, ferry::bench::run_ce_allreduce_probe},
    {"latency", "launch, dependent launch, load chain, last-block and NVLink flag round-trip costs (design probe)",
     ferry::bench::print_latency_usage, ferry::bench::run_latency_probe},
    {"net", "proxy put GB/s and message rate across (virtual) nodes vs ucx_perftest",
     ferry::bench::print_net_usage, ferry::bench::run_net_bench},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: mpirun -np N ferry-bench <subcommand> [options]   (one GPU per rank)\n"
                    "       ferry-bench --knobs [--markdown]\n\nsubcommands:\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-12s %s\n", s.name, s.summary);
  std::fprintf(out,
               "\n'ferry-bench <subcommand> --help' lists a subcommand's options.\n"
               "'ferry-bench --knobs' lists the FERRY_* environment knobs (type, default, the value set here,\n"
               "meaning; exit status 1 when a value set does not parse); with --markdown it prints\n"
               "docs/knobs.md instead. Neither needs MPI or a GPU.\n");
}

// `ferry-bench --knobs [--markdown]`: the knob registry (src/common/knobs.hpp).
int print_knobs(const std::vector<std::string>& args) {
  bool markdown = false;
  for (const std::string& arg : args) {
    if (arg == "--markdown") {
      markdown = true;
    } else {
      std::fprintf(stderr, "ferry-bench --knobs: unknown option '%s' (expected --markdown)\n", arg.c_str());
      return 2;
    }
  }
  if (markdown) {
    std::fputs(ferry::knobs::markdown().c_str(), stdout);
    return 0;
  }
  std::fputs(ferry::knobs::table().c_str(), stdout);
  const std::vector<std::string> problems = ferry::knobs::problems();
  for (const std::string& p : problems) std::fprintf(stderr, "ferry-bench --knobs: %s\n", p.c_str());
  return problems.empty() ? 0 : 1;
}

// Help is printed before MPI starts; under mpirun only the first rank prints it.
bool is_first_launched_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(var)) return std::strcmp(value, "0") == 0;
  }
  return true;
}

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "help"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || is_help(argv[1])) {
    if (is_first_launched_rank()) print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--knobs") {
    if (!is_first_launched_rank()) return 0;
    return print_knobs(std::vector<std::string>(argv + 2, argv + argc));
  }
  const Subcommand* subcommand = nullptr;
  for (const Subcommand& s : kSubcommands) {
    if (name == s.name) subcommand = &s;
  }
  if (subcommand == nullptr) {
    if (is_first_launched_rank()) {
      std::fprintf(stderr, "ferry-bench: unknown subcommand '%s'\n\n", name.c_str());
      print_usage(stderr);
    }
    return 2;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      if (is_first_launched_rank()) subcommand->print_usage(stdout);
      return 0;
    }
  }

  // main owns MPI (MpiBootstrap then neither initializes nor finalizes it), so an
  // error on one rank can abort the job instead of leaving the others waiting in
  // a collective.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int rc = 0;
  bool abort_job = false;
  try {
    auto bootstrap = std::make_shared<ferry::MpiBootstrap>();
    rc = subcommand->run(bootstrap, args);
  } catch (const ferry::bench::UsageError& e) {
    // Every rank parsed the same arguments and stopped here together.
    if (rank == 0) std::fprintf(stderr, "ferry-bench %s: %s\n", name.c_str(), e.what());
    rc = 2;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-bench %s: rank %d: error: %s\n", name.c_str(), rank, e.what());
    rc = 1;
    abort_job = size > 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-bench %s: rank %d: unexpected error: %s\n", name.c_str(), rank, e.what());
    rc = 1;
    abort_job = size > 1;
  }
  std::fflush(stdout);
  if (abort_job) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
