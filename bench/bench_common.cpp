#include "bench_common.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>

#include "ferry/cuda_check.hpp"

namespace ferry::bench {

// ------------------------------------------------------------------ command line

ArgParser::ArgParser(std::vector<std::string> args) : args_(std::move(args)) {}

std::optional<std::string> ArgParser::take_value(const std::string& name) {
  const std::string prefix = name + "=";
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i] == name) {
      if (i + 1 >= args_.size()) throw UsageError("option " + name + " needs a value");
      std::string value = args_[i + 1];
      args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i), args_.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      return value;
    }
    if (args_[i].rfind(prefix, 0) == 0) {
      std::string value = args_[i].substr(prefix.size());
      args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
      return value;
    }
  }
  return std::nullopt;
}

bool ArgParser::take_flag(const std::string& name) {
  auto it = std::find(args_.begin(), args_.end(), name);
  if (it == args_.end()) return false;
  args_.erase(it);
  return true;
}

void ArgParser::finish() const {
  if (!args_.empty()) throw UsageError("unknown argument '" + args_.front() + "' (see --help)");
}

std::vector<std::string> split_list(const std::string& text, char separator) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    std::string item = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    // '4K,,8K', ',4K' or '4K,': a mistyped list, not a shorter one.
    if (item.empty())
      throw UsageError("empty item in the list '" + text + "' (two '" + std::string(1, separator) +
                       "' in a row, or one at an end)");
    items.push_back(std::move(item));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return items;
}

size_t parse_byte_size(const std::string& text) {
  std::string s = text;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  size_t multiplier = 1;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K': multiplier = size_t{1} << 10; break;
      case 'M': multiplier = size_t{1} << 20; break;
      case 'G': multiplier = size_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) s.pop_back();
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) {
    throw UsageError("bad byte size '" + text + "' (expected e.g. 4096, 4K, 256M, 1G)");
  }
  const size_t value = std::stoull(s) * multiplier;
  if (value == 0) throw UsageError("byte size '" + text + "' must be > 0");
  return value;
}

int parse_positive_int(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value <= 0 || value > 1000000000) {
    throw UsageError("option " + option + " needs a positive integer, got '" + text + "'");
  }
  return static_cast<int>(value);
}

int parse_nonnegative_int(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 1000000000) {
    throw UsageError("option " + option + " needs an integer >= 0, got '" + text + "'");
  }
  return static_cast<int>(value);
}

double parse_nonnegative_double(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0) {
    throw UsageError("option " + option + " needs a number >= 0, got '" + text + "'");
  }
  return value;
}

std::string format_byte_size(size_t bytes) {
  const char* suffixes[] = {"G", "M", "K"};
  const int shifts[] = {30, 20, 10};
  for (int i = 0; i < 3; ++i) {
    const size_t unit = size_t{1} << shifts[i];
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffixes[i];
  }
  return std::to_string(bytes);
}

std::string format_fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

// ------------------------------------------------------------------ environment

void keep_nvls_disabled(bool print_warnings) {
  const char* value = std::getenv("NCCL_NVLS_ENABLE");
  if (value == nullptr) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    if (print_warnings) {
      std::printf("warning: NCCL_NVLS_ENABLE was unset; set to 0 for this run "
                  "(NVLink multicast stays off on this host)\n");
    }
  } else if (std::strcmp(value, "0") != 0 && print_warnings) {
    std::printf("WARNING: NCCL_NVLS_ENABLE=%s: NCCL may create NVLink multicast objects, which this "
                "shared host must not use, and its baseline is not the NVLS-off reference; "
                "run with NCCL_NVLS_ENABLE=0\n", value);
  }
}

void require_cuda_device(const std::string& what) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    throw UsageError((what.empty() ? "" : what + " ") + "needs one GPU per rank, and " +
                     ferry::no_gpu_reason(status, devices));
  }
}

void start_gpu_subcommand(const Bootstrap& bootstrap) {
  require_cuda_device();
  keep_nvls_disabled(bootstrap.rank() == 0);
}

void require_one_node(const Communicator& comm, int min_ranks, int max_ranks) {
  if (comm.size() >= min_ranks && comm.size() <= max_ranks && comm.local_size() == comm.size()) return;
  const std::string ranks = min_ranks == max_ranks ? std::to_string(min_ranks)
                                                    : std::to_string(min_ranks) + ".." + std::to_string(max_ranks);
  throw UsageError("needs " + ranks + " ranks on one node");
}

// ------------------------------------------------------------------ CUDA holders

CudaStream::CudaStream() { FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) { FERRY_CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

// ------------------------------------------------------------------ test data

namespace {

uint16_t half_bits_from_int(int v) {  // exact for |v| < 2048
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  const unsigned a = static_cast<unsigned>(std::abs(v));
  int exponent = 0;
  while ((a >> (exponent + 1)) != 0) ++exponent;
  const unsigned mantissa = (a << (10 - exponent)) & 0x3ffu;
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | mantissa);
}

float half_bits_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) magnitude = mantissa != 0 ? NAN : INFINITY;
  else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

}  // namespace

void store_small_int(DataType type, void* base, size_t i, int v) {
  FERRY_ARG_CHECK(v > -2048 && v < 2048, "value " << v << " is not a small integer");
  if (type == DataType::kFloat32) {
    static_cast<float*>(base)[i] = static_cast<float>(v);
  } else if (type == DataType::kBFloat16) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(bits >> 16);  // exact: small integer
  } else {
    static_cast<uint16_t*>(base)[i] = half_bits_from_int(v);
  }
}

float load_as_float(DataType type, const void* base, size_t i) {
  if (type == DataType::kFloat32) return static_cast<const float*>(base)[i];
  const uint16_t h = static_cast<const uint16_t*>(base)[i];
  if (type == DataType::kFloat16) return half_bits_to_float(h);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}


// ------------------------------------------------------------------ output

TablePrinter::TablePrinter(std::vector<Column> columns, std::FILE* out)
    : columns_(std::move(columns)), out_(out) {}

void TablePrinter::print_header() const {
  std::string groups;
  std::string headers;
  std::string rule;
  for (size_t i = 0; i < columns_.size();) {
    // Span consecutive columns of one group; its label is centred over them.
    size_t end = i + 1;
    int span = columns_[i].width;
    while (!columns_[i].group.empty() && end < columns_.size() && columns_[end].group == columns_[i].group) {
      span += 1 + columns_[end].width;
      ++end;
    }
    std::string label = columns_[i].group.substr(0, static_cast<size_t>(span));
    const size_t pad = static_cast<size_t>(span) - label.size();
    if (i != 0) groups += ' ';
    groups += std::string(pad / 2, ' ') + label + std::string(pad - pad / 2, ' ');
    i = end;
  }
  for (size_t i = 0; i < columns_.size(); ++i) {
    char cell[128];
    const Column& c = columns_[i];
    std::snprintf(cell, sizeof(cell), c.left_align ? "%-*s" : "%*s", c.width, c.header.c_str());
    if (i != 0) {
      headers += ' ';
      rule += ' ';
    }
    headers += cell;
    rule += std::string(static_cast<size_t>(c.width), '-');
  }
  std::fprintf(out_, "%s\n%s\n%s\n", groups.c_str(), headers.c_str(), rule.c_str());
  std::fflush(out_);
}

void TablePrinter::print_row(const std::vector<std::string>& cells) const {
  std::string line;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    const std::string text = i < cells.size() ? cells[i] : "";
    char cell[256];
    std::snprintf(cell, sizeof(cell), c.left_align ? "%-*s" : "%*s", c.width, text.c_str());
    if (i != 0) line += ' ';
    line += cell;
  }
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& header)
    : path_(path), num_columns_(header.size()) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    FERRY_THROW(ferry::Error, "cannot open CSV file '" << path << "' for writing: " << std::strerror(errno));
  }
  write_row(header);
}

CsvWriter::~CsvWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvWriter::write_row(const std::vector<std::string>& cells) {
  FERRY_ARG_CHECK(cells.size() == num_columns_,
                  "CSV row has " << cells.size() << " cells, header has " << num_columns_);
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i != 0) line += ',';
    line += cells[i];
  }
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

// ------------------------------------------------------------------ NCCL (baselines)

#if FERRY_BENCH_HAVE_NCCL
NcclCommunicator::NcclCommunicator(ferry::Bootstrap& bootstrap) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) FERRY_BENCH_NCCL_CHECK(ncclGetUniqueId(&id));
  id = bootstrap.all_gather_value(id)[0];  // rank 0's id, through the bootstrap
  FERRY_BENCH_NCCL_CHECK(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()));
}

NcclCommunicator::~NcclCommunicator() {
  // Unwinding after a failure: peers may never join a collective destroy.
  if (std::uncaught_exceptions() > 0) ncclCommAbort(comm_);
  else ncclCommDestroy(comm_);
}

std::string nccl_library_version() {
  int version = 0;
  FERRY_BENCH_NCCL_CHECK(ncclGetVersion(&version));
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}
#endif

CopyProbeOptions parse_copy_probe_options(std::vector<std::string> args) {
  ArgParser parser(std::move(args));
  CopyProbeOptions o;
  if (auto v = parser.take_value("--sms")) {
    o.sms.clear();
    for (const std::string& s : split_list(*v)) o.sms.push_back(parse_positive_int("--sms", s));
  }
  if (auto v = parser.take_value("--bytes")) o.bytes = parse_byte_size(*v);
  if (auto v = parser.take_value("--item-bytes")) o.item_bytes = parse_positive_int("--item-bytes", *v);
  if (auto v = parser.take_value("--threads")) o.threads = parse_positive_int("--threads", *v);
  if (auto v = parser.take_value("--csv")) o.csv_path = *v;
  o.registered_host = parser.take_flag("--registered-host");
  parser.finish();
  if (o.item_bytes % 16 != 0) throw UsageError("--item-bytes must be a multiple of 16");
  if (o.threads % 32 != 0 || o.threads > 1024) throw UsageError("--threads must be a multiple of 32, at most 1024");
  if (o.bytes < size_t(o.item_bytes)) throw UsageError("--bytes must hold at least one item");
  return o;
}

CopyProbeTable::CopyProbeTable(bool leader, const CopyProbeOptions& options) : leader_(leader) {
  if (leader_) {
    std::printf("\n%-14s", "method \\ SMs");
    for (int sms : options.sms) std::printf(" %7d", sms);
    std::printf("\n");
  }
  if (leader_ && !options.csv_path.empty())
    csv_.emplace(options.csv_path, std::vector<std::string>{"method", "sms", "us", "gbps", "ok"});
}

void CopyProbeTable::begin_row(const char* method) const {
  if (leader_) std::printf("%-14s", method);
}

void CopyProbeTable::cell(const char* method, int blocks, double us, double gbps, bool ok) {
  if (leader_) std::printf(" %6.1f%s", gbps, ok ? " " : "!");
  if (csv_)
    csv_->write_row({method, std::to_string(blocks), format_fixed(us, 1), format_fixed(gbps, 1), ok ? "1" : "0"});
}

void CopyProbeTable::end_row() const {
  if (leader_) std::printf("\n");
  std::fflush(stdout);
}

bool no_mismatches_on_any_rank(Bootstrap& bootstrap, const DeviceBuffer& counter, cudaStream_t stream) {
  unsigned long long bad = 0;
  FERRY_CUDA_CHECK(cudaMemcpyAsync(&bad, counter.get(), sizeof(bad), cudaMemcpyDeviceToHost, stream));
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<unsigned long long> all = bootstrap.all_gather_value(bad);
  return std::all_of(all.begin(), all.end(), [](unsigned long long b) { return b == 0; });
}

}  // namespace ferry::bench
