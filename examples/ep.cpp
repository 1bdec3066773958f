// ferry expert parallelism (EP), end to end:
//
//   mpirun -np N ferry-example-ep [--tokens 256] [--hidden 2048] [--topk 4] [--experts 8*N]
//
// A Mixture-of-Experts layer spreads its E experts over the GPUs: rank r holds
// experts [r * E/N, (r + 1) * E/N). Every rank has its own tokens, and a router has
// picked for each token its top-k experts, with a weight each. On every rank this
// program:
//   1. makes random tokens, routing and weights, reproducible from (seed, rank);
//   2. dispatch: sends each token to the ranks that hold its experts; each rank
//      receives the rows its experts must process, grouped by expert;
//   3. runs a stand-in for the experts, on the host for clarity: expert e
//      multiplies its rows by (1 + 0.125 * e);
//   4. combine: sends the expert outputs back to the tokens' home ranks, where
//      out[t] = sum over k of weight[t][k] * output of expert topk[t][k] for token t;
//   5. checks the dispatch output against every rank's inputs (each rank can
//      regenerate them from the seed) and `out` against a host reference.
// Exits non-zero if any rank saw a wrong value.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>  // only for MPI_Abort on errors

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"

namespace {

constexpr uint64_t kSeed = 2024;

struct Shape {
  int tokens = 256;  // T, per rank
  int hidden = 2048; // H, a multiple of 128
  int topk = 4;      // K
  int experts = 0;   // E; 0: 8 per rank
};

// One rank's inputs. Any rank can rebuild any other rank's inputs from (kSeed, rank).
struct Inputs {
  std::vector<__nv_bfloat16> tokens;  // [T, H]
  std::vector<int64_t> topk_idx;      // [T, K]; -1 = no expert
  std::vector<float> topk_weights;    // [T, K]
};

Inputs make_inputs(int rank, const Shape& s) {
  std::mt19937_64 rng(kSeed * 1000 + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_real_distribution<float> weight(0.1f, 1.0f);
  Inputs in;
  in.tokens.resize(static_cast<size_t>(s.tokens) * s.hidden);
  for (auto& x : in.tokens) x = __float2bfloat16(value(rng));

  // K distinct experts per token (a partial shuffle of 0..E-1).
  std::vector<int64_t> ids(static_cast<size_t>(s.experts));
  for (int t = 0; t < s.tokens; ++t) {
    for (int e = 0; e < s.experts; ++e) ids[static_cast<size_t>(e)] = e;
    for (int k = 0; k < s.topk; ++k) {
      const size_t j = static_cast<size_t>(k) + rng() % static_cast<uint64_t>(s.experts - k);
      std::swap(ids[static_cast<size_t>(k)], ids[j]);
      in.topk_idx.push_back(ids[static_cast<size_t>(k)]);
      in.topk_weights.push_back(weight(rng));
    }
    // Every fifth token uses one expert fewer: -1 means "no expert".
    if (s.topk > 1 && t % 5 == 4) in.topk_idx.back() = -1;
  }
  return in;
}

// The stand-in expert: expert e scales its rows by (1 + 0.125 * e).
float expert_scale(int64_t e) { return 1.0f + 0.125f * static_cast<float>(e); }

template <typename T>
struct DeviceArray {  // a cudaMalloc'd array of `count` T
  T* ptr = nullptr;
  explicit DeviceArray(size_t count) { FERRY_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    FERRY_CUDA_CHECK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename T>
std::vector<T> to_host(const void* device, size_t count) {
  std::vector<T> host(count);
  FERRY_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

bool parse_args(int argc, char** argv, Shape& s) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = nullptr;
    if (arg == "--tokens") target = &s.tokens;
    else if (arg == "--hidden") target = &s.hidden;
    else if (arg == "--topk") target = &s.topk;
    else if (arg == "--experts") target = &s.experts;
    if (target == nullptr || i + 1 >= argc) return false;
    *target = std::atoi(argv[++i]);
    if (*target <= 0) return false;
  }
  return true;
}

int run_example(int argc, char** argv, const std::shared_ptr<ferry::MpiBootstrap>& bootstrap) {
  const int rank = bootstrap->rank();
  const int world = bootstrap->size();
  Shape s;
  if (!parse_args(argc, argv, s)) {
    if (rank == 0) {
      std::fprintf(stderr, "usage: mpirun -np N ferry-example-ep [--tokens 256] [--hidden 2048] [--topk 4] "
                           "[--experts 8*N]\n");
    }
    return 2;
  }
  if (s.experts == 0) s.experts = 8 * world;
  if (s.experts % world != 0 || s.topk > s.experts) {
    if (rank == 0) {
      std::fprintf(stderr, "ferry-example-ep: --experts %d must be a multiple of the %d ranks and at least --topk %d\n",
                   s.experts, world, s.topk);
    }
    return 2;
  }
  int gpus = 0;
  const cudaError_t status = cudaGetDeviceCount(&gpus);
  if (status != cudaSuccess || gpus == 0) {
    if (rank == 0)
      std::fprintf(stderr, "ferry-example-ep: it needs one GPU per rank, and %s\n",
                   ferry::no_gpu_reason(status, status == cudaSuccess ? gpus : 0).c_str());
    return 2;
  }

  // ---- setup: a communicator (one GPU per rank) and an EP buffer sized for this problem
  ferry::Communicator comm(bootstrap);
  ferry::EpConfig config;
  config.max_tokens_per_rank = s.tokens;
  config.hidden = s.hidden;
  config.topk = s.topk;
  config.num_experts = s.experts;
  config.dispatch_type = ferry::DataType::kBFloat16;
  config.with_weights = true;
  config.mode = ferry::EpMode::kHighThroughput;  // kLowLatency: decode-sized batches, CUDA-graph capturable
  ferry::EpBuffer ep(comm, config);              // collective: every rank constructs it
  const int local_experts = ep.local_experts();
  const int64_t first_expert = int64_t{rank} * local_experts;
  const int64_t T = s.tokens, H = s.hidden, K = s.topk;
  if (rank == 0) {
    std::printf("ferry EP example: %d ranks, %d tokens per rank, hidden %d, top-%d of %d experts (%d per rank)\n",
                world, s.tokens, s.hidden, s.topk, s.experts, local_experts);
  }

  // A blocking stream: it stays ordered with the plain cudaMemcpy calls below.
  cudaStream_t stream;
  FERRY_CUDA_CHECK(cudaStreamCreate(&stream));

  // ---- 1. this rank's inputs, on the GPU
  const Inputs mine = make_inputs(rank, s);
  DeviceArray<__nv_bfloat16> tokens(mine.tokens);
  DeviceArray<int64_t> topk_idx(mine.topk_idx);
  DeviceArray<float> topk_weights(mine.topk_weights);

  // ---- 2. dispatch. With the default options it waits once for the row counts,
  // so num_rows and host_expert_counts are known here on the host.
  const ferry::DispatchResult received =
      ep.dispatch(ferry::TensorView(tokens.ptr, ferry::DataType::kBFloat16, {T, H}),
                  ferry::TensorView(topk_idx.ptr, ferry::DataType::kInt64, {T, K}),
                  ferry::TensorView(topk_weights.ptr, ferry::DataType::kFloat32, {T, K}),
                  ferry::TensorView(), stream);
  // Rows of local expert le: [offsets[le], offsets[le] + host_expert_counts[le]),
  // ordered by source rank, then by token index at the source.
  const int64_t rows = received.num_rows;
  const auto offsets = to_host<int64_t>(received.expert_offsets, static_cast<size_t>(local_experts) + 1);
  const auto received_rows = to_host<__nv_bfloat16>(received.tokens, static_cast<size_t>(rows * H));

  // ---- 3. the experts (on the host): each local expert scales its rows. The
  // outputs keep the dispatch output's layout (at least one row, even if empty).
  const int64_t out_rows = std::max<int64_t>(rows, 1);
  std::vector<__nv_bfloat16> expert_out(static_cast<size_t>(out_rows * H));
  for (int le = 0; le < local_experts; ++le) {
    const float scale = expert_scale(first_expert + le);
    const int64_t begin = offsets[static_cast<size_t>(le)];
    const int64_t end = begin + received.host_expert_counts[static_cast<size_t>(le)];
    for (size_t i = static_cast<size_t>(begin * H); i < static_cast<size_t>(end * H); ++i) {
      expert_out[i] = __float2bfloat16(scale * __bfloat162float(received_rows[i]));
    }
  }
  DeviceArray<__nv_bfloat16> expert_out_device(expert_out);

  // ---- 4. combine: out[t] = sum_k weight[t][k] * expert output of (t, k), in token order
  DeviceArray<__nv_bfloat16> out(static_cast<size_t>(T * H));
  ep.combine(ferry::TensorView(expert_out_device.ptr, ferry::DataType::kBFloat16, {out_rows, H}),
             received.handle, ferry::TensorView(out.ptr, ferry::DataType::kBFloat16, {T, H}), stream);
  comm.synchronize(stream);  // also throws if a device wait timed out
  const auto result = to_host<__nv_bfloat16>(out.ptr, static_cast<size_t>(T * H));

  // ---- 5a. check the dispatch: rebuild every rank's inputs, list the (rank, token)
  // each local expert should have received, in order, and compare rows bit for bit.
  int64_t wrong_rows = 0;
  std::vector<Inputs> everyone;
  for (int r = 0; r < world; ++r) everyone.push_back(r == rank ? mine : make_inputs(r, s));
  for (int le = 0; le < local_experts; ++le) {
    const int64_t expert = first_expert + le;
    int64_t row = offsets[static_cast<size_t>(le)];
    int64_t count = 0;
    for (int src = 0; src < world; ++src) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t* picks = &everyone[static_cast<size_t>(src)].topk_idx[static_cast<size_t>(t * K)];
        if (std::find(picks, picks + K, expert) == picks + K) continue;
        ++count;
        const __nv_bfloat16* want = &everyone[static_cast<size_t>(src)].tokens[static_cast<size_t>(t * H)];
        const bool same = row < rows && std::memcmp(&received_rows[static_cast<size_t>(row * H)], want,
                                                    static_cast<size_t>(H) * sizeof(__nv_bfloat16)) == 0;
        if (!same && wrong_rows++ < 3) {
          std::fprintf(stderr, "[rank %d] expert %lld row %lld is not token %lld of rank %d\n", rank,
                       static_cast<long long>(expert), static_cast<long long>(row), static_cast<long long>(t), src);
        }
        ++row;
      }
    }
    const int64_t got = received.host_expert_counts[static_cast<size_t>(le)];
    if (count != got) {
      ++wrong_rows;
      std::fprintf(stderr, "[rank %d] expert %lld received %lld rows, expected %lld\n", rank,
                   static_cast<long long>(expert), static_cast<long long>(got), static_cast<long long>(count));
    }
  }

  // ---- 5b. check the combine against an fp32 host reference. Partial sums cross
  // between GPUs in bf16, hence the tolerance: 1e-2 * sum_k |w * y| + 1e-3.
  int64_t wrong_values = 0;
  double max_error = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float x = __bfloat162float(mine.tokens[static_cast<size_t>(t * H + h)]);
      float ref = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = mine.topk_idx[static_cast<size_t>(t * K + k)];
        if (e < 0) continue;
        const float y = __bfloat162float(__float2bfloat16(expert_scale(e) * x));  // what the expert returned
        ref += mine.topk_weights[static_cast<size_t>(t * K + k)] * y;
        magnitude += std::fabs(mine.topk_weights[static_cast<size_t>(t * K + k)] * y);
      }
      const float got = __bfloat162float(result[static_cast<size_t>(t * H + h)]);
      const double error = std::fabs(static_cast<double>(got) - ref);
      max_error = std::max(max_error, std::isnan(error) ? INFINITY : error);
      if (!(error <= 1e-2 * magnitude + 1e-3) && wrong_values++ < 3) {
        std::fprintf(stderr, "[rank %d] out[%lld][%lld] = %g, expected %g\n", rank, static_cast<long long>(t),
                     static_cast<long long>(h), got, ref);
      }
    }
  }
  cudaStreamDestroy(stream);

  // ---- report (rank 0): what every rank received and the largest error
  struct Summary {
    int64_t rows, wrong_rows, wrong_values;
    double max_error;
  };
  const auto all = bootstrap->all_gather_value(Summary{rows, wrong_rows, wrong_values, max_error});
  int64_t all_wrong_rows = 0, all_wrong_values = 0;
  double worst = 0;
  for (const Summary& x : all) {
    all_wrong_rows += x.wrong_rows;
    all_wrong_values += x.wrong_values;
    worst = std::max(worst, x.max_error);
  }
  const int64_t total_wrong = all_wrong_rows + all_wrong_values;
  if (rank == 0) {
    std::printf("rows received per rank (one per token and local expert):");
    for (const Summary& x : all) std::printf(" %lld", static_cast<long long>(x.rows));
    std::printf("\ndispatch: %s\n", all_wrong_rows == 0 ? "every expert received exactly its tokens, in order"
                                                        : "WRONG rows (details on stderr)");
    std::printf("combine: max |out - ref| = %.3g over all ranks%s\n", worst,
                all_wrong_values == 0 ? "" : ", WRONG values (details on stderr)");
    std::printf("ferry EP example: %s\n", total_wrong == 0 ? "PASSED" : "FAILED");
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The bootstrap outlives everything else: MPI stays up until the end, also on errors.
  std::shared_ptr<ferry::MpiBootstrap> bootstrap;
  try {
    bootstrap = std::make_shared<ferry::MpiBootstrap>();
    return run_example(argc, argv, bootstrap);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-example-ep: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-example-ep: unexpected error: %s\n", e.what());
  }
  // The other ranks may be waiting in a collective for this one: end the whole job.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
