// ferry-bench net: put throughput and message rate through the proxy, with
// ucx_perftest on the same transport in the same run as the baseline.
//
//   mpirun -np 2 ferry-bench net [--memory host|cuda|both] [--sizes 4K,64K,1M]
//
// Every rank is its own node (FERRY_RANKS_PER_NODE=1 unless set), so rank 0's
// puts to rank 1 take the proxy. host: host threads push the descriptors (no
// GPU needed: what the proxy and UCX cost). cuda: one GPU block issues them
// from a kernel (dev::put), sources in a device window (the block copies each
// source into the window's pinned host mirror first, or UCX reads the window
// itself where it moves CUDA memory: NOTE [Window staging]).
// Each row also gives the sender's proxy split (ProxyStats): per descriptor the
// time its UCX calls took to issue, and per request issue -> seen complete.
// The baseline is ucx_perftest's ucp_put_bw between the same two hosts, with
// host memory (what goes on the wire in both modes) and, for cuda, with CUDA
// memory as well.
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "common/knobs.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/channel.cuh"
#include "ferry/window.hpp"
#include "net/host_net.hpp"
#include "net/ucx_config.hpp"
#include "net/proxy.hpp"

namespace ferry::bench {

namespace {

struct NetOptions {
  bool host = true, cuda = false;
  std::vector<size_t> sizes{4 << 10, 64 << 10, 1 << 20};
  size_t window_bytes = 0;  // 0: each case's put size (one buffer reused, as ucx_perftest does)
  size_t bytes_per_case = size_t{256} << 20;  // each size moves about this much (at least 64 puts)
  bool perftest = true;
  bool both_ways = false;  // host producers on both ranks at once, each to the other (--both-ways)
  bool exchange = false;   // --exchange: put_with_signal both ways, then wait (a cross-node AllReduce step)
  int pieces = 1;          // --pieces K: each exchange is K puts of size / K, each with its own signal
  std::string csv;
};

struct Measured {
  double gbps = 0, mrate = 0;
  bool peer_failure = false;  // ferry's endpoints had peer-failure handling (the baseline gets -e)
  // The sender's proxy over the timed puts (ProxyStats): time handling each
  // descriptor (its UCX calls), and from issue to seen complete per request.
  double issue_us = 0, complete_us = 0;
};

// Rank 0's proxy split between two ProxyStats snapshots, into m (every rank gets rank 0's figures).
void add_proxy_split(Bootstrap& bootstrap, const net::ProxyStats& before, const net::ProxyStats& after, Measured* m) {
  std::array<double, 2> mine{0, 0};
  if (after.descriptors > before.descriptors)
    mine[0] = (after.issue_us - before.issue_us) / static_cast<double>(after.descriptors - before.descriptors);
  if (after.completed > before.completed)
    mine[1] = (after.complete_us - before.complete_us) / static_cast<double>(after.completed - before.completed);
  const std::vector<std::array<double, 2>> all = bootstrap.all_gather_value(mine);
  m->issue_us = all[0][0];
  m->complete_us = all[0][1];
}

// NOTE [Net bench footprint]: ucx_perftest puts from and into one buffer of
// the message size, hot in cache. By default ferry does the same (a window of
// the put size, every put at offset 0); --window N spreads the puts over N
// bytes (64M: cold buffers, 2-4x slower on shared memory for both).
size_t window_for(const NetOptions& o, size_t size) { return o.window_bytes != 0 ? o.window_bytes : size; }

int puts_for(const NetOptions& o, size_t size) {
  return static_cast<int>(std::max<size_t>(64, std::min<size_t>(100000, o.bytes_per_case / size)));
}

// ------------------------------------------------------------ ucx_perftest

std::string perftest_path() {
  if (std::optional<std::string> path = knobs::kUcxPerftest.read()) return *path;
#ifdef FERRY_UCX_PERFTEST
  return FERRY_UCX_PERFTEST;
#else
  return "";
#endif
}

std::string hostname_of(Bootstrap& bootstrap, int rank) {
  std::array<char, 256> mine{};
  gethostname(mine.data(), mine.size() - 1);
  std::vector<char> all(256 * bootstrap.size());
  bootstrap.all_gather(mine.data(), all.data(), 256);
  return std::string(all.data() + 256 * rank);
}

// Rank 1 serves, rank 0 measures; the result (MB/s, msg/s, from the "Final:"
// line) reaches every rank. Zeros when ucx_perftest is missing or failed.
Measured run_perftest(Bootstrap& bootstrap, size_t size, int iters, const char* memory, int port,
                      bool peer_failure) {
  const std::string error_mode = peer_failure ? " -e" : "";
  const std::string exe = perftest_path();
  const std::string server_host = hostname_of(bootstrap, 1);
  std::string lib;
#ifdef FERRY_UCX_LIBRARY_DIR
  lib = FERRY_UCX_LIBRARY_DIR;
#endif
  std::string env = lib.empty() ? "" : "LD_LIBRARY_PATH=" + lib + ":${LD_LIBRARY_PATH} ";
  // Like with like: the tcp segments ferry's transport asks UCX for (NOTE [tcp segments]).
  if (const uint64_t segment_bytes = net::tcp_segment_bytes(); segment_bytes != 0)
    for (const char* name : {"UCX_TCP_TX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE"})
      env += std::string(name) + "=" + std::to_string(segment_bytes) + " ";
  // CUDA memory needs a CUDA transport next to the network one (UCX_TLS=tcp,self
  // alone makes ucx_perftest -m cuda fail): add cuda_copy, as ferry's staging does.
  const char* tls = std::getenv("UCX_TLS");
  if (std::string(memory) == "cuda" && tls != nullptr && std::string(tls) != "all" &&
      std::string(tls).find("cuda") == std::string::npos)
    env += "UCX_TLS=" + std::string(tls) + ",cuda_copy ";
  std::array<double, 2> result{0, 0};
  const int found = exe.empty() || access(exe.c_str(), X_OK) != 0 ? 0 : 1;
  const std::vector<int> all_found = bootstrap.all_gather_value(found);  // both ranks run it, or neither
  if (!all_found[0] || !all_found[1]) return Measured{};
  FILE* server = nullptr;
  if (bootstrap.rank() == 1) {
    const std::string cmd = env + exe + " -p " + std::to_string(port) + " -m " + memory + error_mode + " 2>&1";
    server = popen(cmd.c_str(), "r");
  }
  bootstrap.barrier();
  if (bootstrap.rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server listens
    std::ostringstream cmd;
    cmd << env << exe << " " << server_host << " -p " << port << " -t ucp_put_bw -s " << size << " -n " << iters
        << " -w " << std::max(8, iters / 10) << " -m " << memory << error_mode << " 2>&1";
    FILE* client = popen(cmd.str().c_str(), "r");
    char line[1024];
    while (client != nullptr && std::fgets(line, sizeof(line), client) != nullptr) {
      if (std::strncmp(line, "Final:", 6) != 0) continue;
      double iters_done, p50, avg, overall, bw_avg, bw_overall, rate_avg, rate_overall;
      if (std::sscanf(line + 6, "%lf %lf %lf %lf %lf %lf %lf %lf", &iters_done, &p50, &avg, &overall, &bw_avg,
                      &bw_overall, &rate_avg, &rate_overall) == 8) {
        result = {bw_overall * 1e6 / 1e9 * (1 << 20) / 1e6, rate_overall};  // MB/s is MiB/s in ucx_perftest
      }
    }
    if (client != nullptr) pclose(client);
  }
  bootstrap.barrier();
  if (server != nullptr) pclose(server);
  std::vector<std::array<double, 2>> all = bootstrap.all_gather_value(result);
  return Measured{all[0][0], all[0][1]};
}

// ------------------------------------------------------------ host producers

Measured run_host(Bootstrap& bootstrap, const NetOptions& o, size_t size) {
  net::HostNet net(bootstrap, window_for(o, size), 1, 1024, std::chrono::milliseconds(60000));
  const int iters = puts_for(o, size);
  const size_t slots = std::max<size_t>(1, window_for(o, size) / size);
  double seconds = 0;
  net::ProxyStats before, after;
  // --both-ways: each rank puts to the other at once (what a cross-node AllReduce
  // or all-to-all does); the slower rank's time counts.
  const int peer = 1 - bootstrap.rank();
  const bool sends = o.both_ways || bootstrap.rank() == 0;
  bootstrap.barrier();
  if (sends) {
    for (int i = 0; i < std::max(8, iters / 10); ++i) net.put(peer, (i % slots) * size, (i % slots) * size, size);
    net.proxy->quiet();
  }
  bootstrap.barrier();
  if (sends) {
    before = net.proxy->stats();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) net.put(peer, (i % slots) * size, (i % slots) * size, size);
    net.proxy->quiet();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    after = net.proxy->stats();
  }
  bootstrap.barrier();
  const std::vector<double> all = bootstrap.all_gather_value(seconds);
  const double slowest = std::max(all[0], all[1]);
  Measured m{iters * static_cast<double>(size) / slowest / 1e9, iters / slowest,
             net.proxy->transport().detects_peer_failure()};
  add_proxy_split(bootstrap, before, after, &m);
  return m;
}

// --exchange: each iteration, both ranks put `size` bytes with a signal to the
// other, then wait for the other's signal: one step of a cross-node AllReduce
// over the proxy, without the kernels. With --pieces K, K puts of size / K, each
// with its own signal (as the hierarchical AllReduce's blocks put their chunks).
// Microseconds per exchange, rank 0's clock.
double run_exchange(Bootstrap& bootstrap, const NetOptions& o, size_t size) {
  const auto pieces = static_cast<uint32_t>(o.pieces);
  net::HostNet net(bootstrap, size, pieces, 1024, std::chrono::milliseconds(60000));
  const int peer = 1 - bootstrap.rank();
  const int iters = std::min(puts_for(o, size), 2000);
  const size_t piece = (size + pieces - 1) / pieces;
  uint64_t done = 0;
  const auto step = [&] {
    for (uint32_t k = 0; k < pieces; ++k) {
      const size_t begin = std::min(size, k * piece), n = std::min(size, begin + piece) - begin;
      net.put_with_signal(peer, begin, begin, n, k, 1);
    }
    ++done;
    for (uint32_t k = 0; k < pieces; ++k) net.wait_signal(peer, k, done, std::chrono::milliseconds(60000));
  };
  bootstrap.barrier();
  for (int i = 0; i < std::max(8, iters / 10); ++i) step();
  bootstrap.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  net.proxy->quiet();
  bootstrap.barrier();
  return bootstrap.all_gather_value(seconds)[0] / iters * 1e6;
}

// ------------------------------------------------------------ GPU producers

constexpr int kPushThreads = 512;

__global__ void push_puts(DeviceWindow w, int peer, int iters, size_t size, size_t slots) {
  for (int i = 0; i < iters; ++i) {
    const size_t offset = (i % slots) * size;
    ferry::device::put(w, peer, offset, offset, size);  // block scope
  }
  if (threadIdx.x == 0) ferry::device::quiet(w);
}

Measured run_cuda(Communicator& comm, const NetOptions& o, size_t size, std::string* landing) {
  cudaFuncAttributes attributes;  // loaded up front (docs/internode.md, "Lazy module loading")
  FERRY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, push_puts));
  Window window(comm, window_for(o, size));
  *landing = window.network_writes_device_memory() ? "device" : "staged";
  const int iters = puts_for(o, size);
  const size_t slots = std::max<size_t>(1, window_for(o, size) / size);
  CudaStream stream;
  cudaEvent_t start, stop;
  FERRY_CUDA_CHECK(cudaEventCreate(&start));
  FERRY_CUDA_CHECK(cudaEventCreate(&stop));
  float ms = 0;
  net::ProxyStats before, after;
  comm.bootstrap().barrier();
  if (comm.rank() == 0) {
    push_puts<<<1, kPushThreads, 0, stream.get()>>>(window.device(), 1, std::max(8, iters / 10), size, slots);
    comm.synchronize(stream.get());
    before = comm.proxy()->stats();
    FERRY_CUDA_CHECK(cudaEventRecord(start, stream.get()));
    push_puts<<<1, kPushThreads, 0, stream.get()>>>(window.device(), 1, iters, size, slots);
    FERRY_CUDA_CHECK(cudaEventRecord(stop, stream.get()));
    comm.synchronize(stream.get());
    FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    after = comm.proxy()->stats();
  }
  comm.bootstrap().barrier();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const std::vector<float> all = comm.bootstrap().all_gather_value(ms);
  const double seconds = all[0] / 1e3;
  Measured m{iters * static_cast<double>(size) / seconds / 1e9, iters / seconds,
             comm.proxy()->transport().detects_peer_failure()};
  add_proxy_split(comm.bootstrap(), before, after, &m);
  return m;
}

NetOptions parse(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  NetOptions o;
  if (auto m = parser.take_value("--memory")) {
    if (*m == "host") o = NetOptions{true, false};
    else if (*m == "cuda") o = NetOptions{false, true};
    else if (*m == "both") o = NetOptions{true, true};
    else FERRY_THROW(UsageError, "--memory must be host, cuda or both, got '" << *m << "'");
  }
  if (auto s = parser.take_value("--sizes")) {
    o.sizes.clear();
    for (const std::string& item : split_list(*s)) o.sizes.push_back(parse_byte_size(item));
  }
  if (auto b = parser.take_value("--bytes")) o.bytes_per_case = parse_byte_size(*b);
  if (auto w = parser.take_value("--window")) o.window_bytes = parse_byte_size(*w);
  if (parser.take_flag("--no-perftest")) o.perftest = false;
  if (parser.take_flag("--both-ways")) o.both_ways = true;
  if (parser.take_flag("--exchange")) o.exchange = true;
  if (auto k = parser.take_value("--pieces")) o.pieces = parse_positive_int("--pieces", *k);
  if (auto c = parser.take_value("--csv")) o.csv = *c;
  parser.finish();
  if (o.pieces > 256) FERRY_THROW(UsageError, "--pieces must be at most 256, got " << o.pieces);
  if (o.pieces > 1 && !o.exchange) FERRY_THROW(UsageError, "--pieces is for --exchange");
  if ((o.both_ways || o.exchange) && o.cuda)
    FERRY_THROW(UsageError, (o.exchange ? "--exchange" : "--both-ways") << " is for --memory host only");
  for (size_t s : o.sizes) {
    if (s == 0 || s > (size_t{64} << 20)) FERRY_THROW(UsageError, "sizes must be in (0, 64M], got " << s);
    if (o.window_bytes != 0 && s > o.window_bytes)
      FERRY_THROW(UsageError, "--window " << o.window_bytes << " is smaller than the put size " << s);
  }
  return o;
}

}  // namespace

void print_net_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np 2 ferry-bench net [options]\n"
               "  Proxy put throughput (GB/s) and message rate, rank 0 -> rank 1, each rank its own node,\n"
               "  against ucx_perftest ucp_put_bw on the same transport (UCX_TLS picks it: tcp, sm, ...).\n"
               "  --memory host|cuda|both  host producers and host windows (no GPU), GPU producers and\n"
               "                           device windows, or both (default host)\n"
               "  --sizes LIST             put sizes (default 4K,64K,1M)\n"
               "  --bytes N                bytes moved per size (default 256M; at least 64 puts)\n"
               "  --window N               spread the puts over a window of N bytes (default: the put size,\n"
               "                           one buffer reused, as ucx_perftest does)\n"
               "  --no-perftest            skip the ucx_perftest baseline\n"
               "  --both-ways              (host) both ranks put to each other at once; GB/s per direction\n"
               "                           of the slower rank (ucx_perftest stays one way)\n"
               "  --exchange               (host) instead of the table: both ranks put_with_signal to each\n"
               "                           other, then wait for the other's signal (an AllReduce step over\n"
               "                           the proxy); microseconds per exchange\n"
               "  --pieces K               (--exchange) K puts of size / K, each with its own signal (the\n"
               "                           hierarchical AllReduce's blocks); default 1\n"
               "  --csv PATH               also write the rows as CSV\n");
}

int run_net_bench(std::shared_ptr<Bootstrap> bootstrap, std::vector<std::string> args) {
  const NetOptions o = parse(std::move(args));
  // A usage error, said plainly (FERRY_CHECK would add the expression and this file's path).
  if (bootstrap->size() != 2)
    throw UsageError("measures puts between 2 ranks: start it with mpirun -np 2 (got " +
                     std::to_string(bootstrap->size()) + " rank" + (bootstrap->size() == 1 ? "" : "s") + ")");
  if (!knobs::kRanksPerNode.read()) setenv(knobs::kRanksPerNode.name(), "1", 1);
  if (!knobs::kProxyStats.read()) setenv(knobs::kProxyStats.name(), "1", 1);  // the proxy split columns
  const bool print = bootstrap->rank() == 0;
  const char* tls = std::getenv("UCX_TLS");
  if (o.exchange) {
    if (print)
      std::printf("ferry-bench net --exchange: 2 ranks, each its own node; UCX_TLS=%s; tcp segments: %s; both ranks "
                  "put_with_signal in %d piece%s then wait, per size: us per exchange, GB/s per direction\n",
                  tls ? tls : "(UCX's choice)", std::to_string(net::tcp_segment_bytes()).c_str(), o.pieces,
                  o.pieces == 1 ? "" : "s");
    for (size_t size : o.sizes) {
      const double us = run_exchange(*bootstrap, o, size);
      if (print)
        std::printf("exchange %8s  %10.2f us  %7.3f GB/s\n", format_byte_size(size).c_str(), us,
                    static_cast<double>(size) / us / 1e3);
    }
    return 0;
  }
  std::unique_ptr<Communicator> comm;
  if (o.cuda) {
    require_cuda_device("--memory cuda");
    comm = std::make_unique<Communicator>(bootstrap);
  }
  TablePrinter table({{"", "memory", 7, true},
                      {"", "size", 6},
                      {"", "puts", 7},
                      {"ferry proxy", "GB/s", 8},
                      {"ferry proxy", "Mmsg/s", 8},
                      {"ucx_perftest host", "GB/s", 8},
                      {"ucx_perftest host", "Mmsg/s", 8},
                      {"", "ratio", 6},
                      {"ucx_perftest cuda", "GB/s", 8},
                      {"", "landing", 8, true},
                      {"proxy us", "issue", 7},
                      {"proxy us", "done", 7}});
  std::unique_ptr<CsvWriter> csv;
  if (print && !o.csv.empty())
    csv = std::make_unique<CsvWriter>(o.csv, std::vector<std::string>{"memory", "bytes", "puts", "ferry_gbps",
                                                                      "ferry_msg_per_s", "perftest_gbps",
                                                                      "perftest_msg_per_s", "perftest_cuda_gbps",
                                                                      "landing", "ucx_tls", "proxy_issue_us",
                                                                      "proxy_complete_us"});
  if (print) {
    const std::optional<std::string> pf = knobs::raw(knobs::kUcxPeerFailure.info());
    std::printf("ferry-bench net: 2 ranks, each its own node; UCX_TLS=%s; FERRY_UCX_PEER_FAILURE=%s (ucx_perftest "
                "gets -e when ferry's endpoints handle peer failure); tcp segments: %s (both; 0: UCX's); window: %s; "
                "%s; ratio: ferry / ucx_perftest on the same memory type\n",
                tls ? tls : "(UCX's choice)", pf ? pf->c_str() : "(default auto)",
                std::to_string(net::tcp_segment_bytes()).c_str(),
                o.window_bytes ? format_byte_size(o.window_bytes).c_str() : "the put size",
                o.both_ways ? "both ranks put at once (ferry GB/s: per direction, the slower rank)" : "rank 0 -> rank 1");
    table.print_header();
  }
  int port = bootstrap->all_gather_value(14000 + static_cast<int>(getpid() % 1000))[0];
  for (const bool cuda : {false, true}) {
    if ((cuda && !o.cuda) || (!cuda && !o.host)) continue;
    for (size_t size : o.sizes) {
      std::string landing = "host";
      const Measured ours = cuda ? run_cuda(*comm, o, size, &landing) : run_host(*bootstrap, o, size);
      const int iters = puts_for(o, size);
      const Measured base =
          o.perftest ? run_perftest(*bootstrap, size, iters, "host", port++, ours.peer_failure) : Measured{};
      const Measured base_cuda =
          o.perftest && cuda ? run_perftest(*bootstrap, size, iters, "cuda", port++, ours.peer_failure) : Measured{};
      if (!print) continue;
      // Like with like: CUDA rows against ucx_perftest moving CUDA memory.
      const Measured& same_memory = cuda ? base_cuda : base;
      const std::string ratio = same_memory.gbps > 0 ? format_fixed(ours.gbps / same_memory.gbps, 2) : "-";
      table.print_row({cuda ? "cuda" : "host", format_byte_size(size), std::to_string(iters),
                       format_fixed(ours.gbps, 2), format_fixed(ours.mrate / 1e6, 3),
                       base.gbps > 0 ? format_fixed(base.gbps, 2) : "-",
                       base.gbps > 0 ? format_fixed(base.mrate / 1e6, 3) : "-", ratio,
                       base_cuda.gbps > 0 ? format_fixed(base_cuda.gbps, 2) : "-", landing,
                       format_fixed(ours.issue_us, 2), format_fixed(ours.complete_us, 2)});
      if (csv)
        csv->write_row({cuda ? "cuda" : "host", std::to_string(size), std::to_string(iters),
                        format_fixed(ours.gbps, 3), format_fixed(ours.mrate, 0), format_fixed(base.gbps, 3),
                        format_fixed(base.mrate, 0), format_fixed(base_cuda.gbps, 3), landing, tls ? tls : "",
                        format_fixed(ours.issue_us, 3), format_fixed(ours.complete_us, 3)});
    }
  }
  if (print && comm && comm->proxy())
    std::printf("proxy transport: %s; bytes put: %zu\n",
                comm->proxy()->transport().describe().c_str(), static_cast<size_t>(comm->proxy()->put_bytes()));
  return 0;
}

}  // namespace ferry::bench
