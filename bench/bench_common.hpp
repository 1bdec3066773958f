// Shared pieces of ferry-bench: command-line parsing, CUDA resource holders,
// CUDA-graph timing (median over replays, max over ranks), and the aligned table
// and CSV writers that every subcommand reports through.
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
#include "ferry/error.hpp"
#include "ferry/types.hpp"

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

std::vector<std::string> split_list(const std::string& text, char separator = ',');
// "4096", "4K", "256M", "1G" (binary multiples, case-insensitive, optional trailing B).
size_t parse_byte_size(const std::string& text);
int parse_positive_int(const std::string& option, const std::string& text);
// 4096 -> "4K", 268435456 -> "256M", 1000 -> "1000".
std::string format_byte_size(size_t bytes);

// ------------------------------------------------------------------ environment

// NVLink multicast must stay off on the shared host (FACTS.md). The bench never
// turns it on; when NCCL_NVLS_ENABLE is unset it sets it to "0" for this process
// (before NCCL starts), and it warns on rank 0 whenever the variable was not "0".
void keep_nvls_disabled(bool print_warnings);

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

// ------------------------------------------------------------------ timing

// One operation under test, enqueued on a stream (graph-capturable where possible).
struct TimedOp {
  std::string name;  // for messages
  std::function<void(cudaStream_t)> enqueue;
  // Waits for the stream and reports asynchronous failures (ferry: device
  // timeouts); defaults to a checked cudaStreamSynchronize.
  std::function<void(cudaStream_t)> synchronize;
};

struct TimingOptions {
  int ops_per_graph = 10;     // G back-to-back calls captured into one graph
  int warmup_replays = 5;
  int timed_replays = 0;      // 0: chosen from a probe so a case takes ~target_seconds
  double target_seconds = 0.1;
  int min_replays = 20;
  int max_replays = 300;
};

struct TimingResult {
  double op_us = 0;        // median over replays of (replay time / G); max over ranks
  int replays = 0;         // timed replays
  bool used_graph = true;  // false: the op could not be captured; timed eagerly
};

// Collective over `bootstrap` (every rank must call it with the same options).
// Captures G calls into a CUDA graph, warms up, then times each replay between
// two events. Falls back to launching the G calls directly (with a warning on
// rank 0) if capture fails with a CUDA error.
TimingResult time_op(const TimedOp& op, cudaStream_t stream, ferry::Bootstrap& bootstrap,
                     const TimingOptions& options);

double median(std::vector<double> values);

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

// ------------------------------------------------------------------ subcommands

// Entry points, one file each. `args` excludes the program and subcommand names.
// The caller owns MPI's lifetime; `bootstrap` spans every rank of the job.
int run_allreduce_bench(std::shared_ptr<ferry::Bootstrap> bootstrap, std::vector<std::string> args);
void print_allreduce_usage(std::FILE* out);

}  // namespace ferry::bench
