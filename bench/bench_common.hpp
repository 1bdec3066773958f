// Shared pieces of ferry-bench: command-line parsing, CUDA resource holders,
// and the aligned table and CSV writers that every subcommand reports through.
// CUDA-graph timing lives in bench_timing.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

#if FERRY_BENCH_HAVE_NCCL
#include <nccl.h>
#endif

namespace ferry::bench {

// A bad command line. Every rank sees the same arguments, so every rank throws it
// together; main prints it once and exits without aborting the MPI job.
class UsageError : public ferry::InvalidArgument {
 public:
  using ferry::InvalidArgument::InvalidArgument;
};

// ------------------------------------------------------------------ command line

// Options of one subcommand: "--name value", "--name=value" and "--flag".
// Each take_* consumes what it matched; finish() rejects whatever is left.
class ArgParser {
 public:
  explicit ArgParser(std::vector<std::string> args);
  std::optional<std::string> take_value(const std::string& name);
  bool take_flag(const std::string& name);
  void finish() const;  // throws UsageError naming the first unknown argument

 private:
  std::vector<std::string> args_;
};

// Items of a separated list; an empty item ('4K,,8K') is a UsageError.
std::vector<std::string> split_list(const std::string& text, char separator = ',');
// "4096", "4K", "256M", "1G" (binary multiples, case-insensitive, optional trailing B).
size_t parse_byte_size(const std::string& text);
int parse_positive_int(const std::string& option, const std::string& text);
// 4096 -> "4K", 268435456 -> "256M", 1000 -> "1000".
std::string format_byte_size(size_t bytes);
int parse_nonnegative_int(const std::string& option, const std::string& text);
double parse_nonnegative_double(const std::string& option, const std::string& text);

// ------------------------------------------------------------------ environment

// NVLink multicast must stay off on the shared host (FACTS.md). The bench never
// turns it on; when NCCL_NVLS_ENABLE is unset it sets it to "0" for this process
// (before NCCL starts), and it warns on rank 0 whenever the variable was not "0".
void keep_nvls_disabled(bool print_warnings);

// Throws UsageError (printed once, by rank 0) when this process sees no CUDA device. The messages of these
// helpers leave out the subcommand: ferry-bench's main prints "ferry-bench <subcommand>: " before every
// UsageError. `what`: the option that needs the GPU, where only some runs need one (e.g. "--memory cuda").
void require_cuda_device(const std::string& what = "");

// The start of every subcommand that runs on GPUs: require_cuda_device, then keep_nvls_disabled (its
// warnings from rank 0).
void start_gpu_subcommand(const Bootstrap& bootstrap);
// Throws UsageError unless the communicator has min_ranks..max_ranks ranks, all in one node.
void require_one_node(const Communicator& comm, int min_ranks, int max_ranks);

// ------------------------------------------------------------------ CUDA holders

// Destructors ignore CUDA errors: they run during unwinding after a failure.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// ------------------------------------------------------------------ test data

// Small integers (|v| < 2048) stored exactly as bf16 / fp16 / fp32 on the host,
// and read back as float, for checks that compare results bit for bit.
void store_small_int(DataType type, void* base, size_t index, int value);
float load_as_float(DataType type, const void* base, size_t index);

// ------------------------------------------------------------------ output

// Fixed-width text table. Columns with the same non-empty group get one label
// above them. Rows are printed as they are added, so long runs show progress.
class TablePrinter {
 public:
  struct Column {
    std::string group;
    std::string header;
    int width;
    bool left_align = false;
  };
  TablePrinter(std::vector<Column> columns, std::FILE* out = stdout);
  void print_header() const;
  void print_row(const std::vector<std::string>& cells) const;

 private:
  std::vector<Column> columns_;
  std::FILE* out_;
};

// CSV file with a fixed header; each row is flushed so a crash keeps what was measured.
class CsvWriter {
 public:
  CsvWriter(const std::string& path, const std::vector<std::string>& header);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;
  void write_row(const std::vector<std::string>& cells);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  size_t num_columns_;
};

std::string format_fixed(double value, int decimals);

// ------------------------------------------------------------------ NCCL (baselines)

#if FERRY_BENCH_HAVE_NCCL
#define FERRY_BENCH_NCCL_CHECK(expr)                                                              \
  do {                                                                                            \
    ncclResult_t ferry_bench_nccl_result_ = (expr);                                               \
    if (ferry_bench_nccl_result_ != ncclSuccess) {                                                \
      FERRY_THROW(::ferry::Error, "NCCL call `" #expr "` failed: " << ncclGetErrorString(ferry_bench_nccl_result_)); \
    }                                                                                             \
  } while (0)

// An NCCL communicator over every rank of `bootstrap` (rank 0's unique id travels
// through it). Aborted instead of destroyed when unwinding after a failure.
class NcclCommunicator {
 public:
  explicit NcclCommunicator(ferry::Bootstrap& bootstrap);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

std::string nccl_library_version();  // "2.28.3"
#endif

// ------------------------------------------------------------------ subcommands

// Entry points, one file each. `args` excludes the program and subcommand names.
// The caller owns MPI's lifetime; `bootstrap` spans every rank of the job.
int run_allreduce_bench(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_allreduce_usage(std::FILE* out);
int run_ep_bench(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_ep_usage(std::FILE* out);
// The options of the copy probes (ferry-bench nvlink, pcie): --sms, --bytes, --item-bytes, --threads, --csv.
struct CopyProbeOptions {
  std::vector<int> sms = {4, 8, 12, 16, 24, 32, 64, 132};
  size_t bytes = size_t(32) << 20;
  int item_bytes = 14336;
  int threads = 1024;
  std::string csv_path;
  // pcie: host memory from cudaHostAlloc, or (--registered-host) shared pages mapped by mmap and registered with
  // cudaHostRegister, as UCX shared memory's landing buffers are (NOTE [Mapped peers]).
  bool registered_host = false;
};
CopyProbeOptions parse_copy_probe_options(std::vector<std::string> args);

// The copy probes' table: one row per method, one GB/s cell per SM count (rank 0 prints), and --csv's rows
// (method, sms, us, gbps, ok). The constructor prints the header row after the probe's own title lines.
class CopyProbeTable {
 public:
  CopyProbeTable(bool leader, const CopyProbeOptions& options);
  void begin_row(const char* method) const;
  void cell(const char* method, int blocks, double us, double gbps, bool ok);
  void end_row() const;

 private:
  bool leader_;
  std::optional<CsvWriter> csv_;
};

// `count` values of T from GPU memory (a synchronous copy).
template <typename T>
std::vector<T> download(const void* device, size_t count) {
  std::vector<T> host(count);
  if (count > 0) FERRY_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Collective: true when the mismatch counter (one unsigned long long in GPU memory, written by check kernels
// on `stream`) is 0 on every rank.
bool no_mismatches_on_any_rank(Bootstrap& bootstrap, const DeviceBuffer& counter, cudaStream_t stream);

int run_nvlink_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_nvlink_usage(std::FILE* out);
int run_pcie_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_pcie_usage(std::FILE* out);
int run_pcie_peer_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_pcie_peer_usage(std::FILE* out);
int run_pcie_latency_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_pcie_latency_usage(std::FILE* out);
int run_pcie_ce_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_pcie_ce_usage(std::FILE* out);
int run_ce_allreduce_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_ce_allreduce_usage(std::FILE* out);
int run_latency_probe(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_latency_usage(std::FILE* out);
int run_net_bench(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_net_usage(std::FILE* out);

}  // namespace ferry::bench
