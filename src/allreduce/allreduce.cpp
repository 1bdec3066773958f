// AllReduce host side: argument checks, algorithm choice, scratch layout and
// splitting a call into launches each algorithm's scratch can carry.
#include "ferry/allreduce.hpp"

#include <algorithm>
#include <cstring>

#include "allreduce/layout.hpp"
#include "common/env.hpp"
#include "allreduce/validate.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry {

namespace {

// Kernels, each with its own scratch and flag region: one-shot, two-shot, ring,
// recursive doubling (indexed like AllReduceAlgorithm - 1), then one-shot LL.
constexpr int kNumKernels = 5;
constexpr int kOneShotLlKernel = 4;
int kernel_index(AllReduceAlgorithm a) { return static_cast<int>(a) - 1; }
bool device_aligned(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

const char* algorithm_name(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto: return "auto";
    case AllReduceAlgorithm::kOneShot: return "one_shot";
    case AllReduceAlgorithm::kTwoShot: return "two_shot";
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kRecursiveDoubling: return "recursive_doubling";
  }
  return "unknown";
}

AllReduceAlgorithm algorithm_from_string(const std::string& name) {
  for (auto a : {AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kOneShot, AllReduceAlgorithm::kTwoShot,
                 AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRecursiveDoubling})
    if (name == algorithm_name(a)) return a;
  if (name == "oneshot" || name == "one-shot") return AllReduceAlgorithm::kOneShot;
  if (name == "twoshot" || name == "two-shot") return AllReduceAlgorithm::kTwoShot;
  if (name == "rd" || name == "recursive-doubling") return AllReduceAlgorithm::kRecursiveDoubling;
  FERRY_THROW(InvalidArgument, "unknown allreduce algorithm '"
                                   << name << "' (expected auto, one_shot, two_shot, ring, recursive_doubling)");
}

namespace allreduce {

size_t tuning_knob(const char* name) { return env_size(name, 0); }

bool algorithm_supported(AllReduceAlgorithm algorithm, const CommShape& comm) {
  if (!comm.single_node || comm.world_size > kMaxRanks) return false;
  switch (algorithm) {
    case AllReduceAlgorithm::kAuto:
    case AllReduceAlgorithm::kOneShot:
    case AllReduceAlgorithm::kTwoShot:
    case AllReduceAlgorithm::kRing: return true;
    case AllReduceAlgorithm::kRecursiveDoubling: return (comm.world_size & (comm.world_size - 1)) == 0;
  }
  return false;
}

size_t validate_call(const CallShape& call, const CommShape& comm) {
  FERRY_ARG_CHECK(call.in != nullptr, "AllReduce::run: input pointer is null");
  FERRY_ARG_CHECK(call.out != nullptr, "AllReduce::run: output pointer is null");
  FERRY_ARG_CHECK(call.count > 0, "AllReduce::run: count must be > 0, got " << call.count);
  const size_t elem = dtype_size(call.type);  // throws for unknown types
  FERRY_ARG_CHECK(call.type != DataType::kFloat8E4M3,
                  "AllReduce::run: float8_e4m3 is not a reduction type (use float32, float64, int32, "
                  "int64, bfloat16 or float16)");
  FERRY_ARG_CHECK(std::strcmp(reduce_op_name(call.op), "unknown") != 0,
                  "AllReduce::run: unsupported reduce op value " << static_cast<int>(call.op));
  FERRY_ARG_CHECK(std::strcmp(algorithm_name(call.algorithm), "unknown") != 0,
                  "AllReduce::run: unknown algorithm value " << static_cast<int>(call.algorithm));
  FERRY_ARG_CHECK(call.count <= comm.max_bytes / elem,
                  "AllReduce::run: " << call.count << " elements of " << dtype_name(call.type) << " ("
                                     << call.count * elem << " bytes) exceed the capacity of " << comm.max_bytes
                                     << " bytes given at construction");
  FERRY_CHECK(comm.single_node, NotSupported,
              "AllReduce across nodes is not implemented yet (world size " << comm.world_size
                                                                           << " spans several nodes)");
  FERRY_CHECK(comm.world_size <= kMaxRanks, NotSupported,
              "AllReduce supports at most " << kMaxRanks << " ranks in a node, got " << comm.world_size);
  FERRY_CHECK(algorithm_supported(call.algorithm, comm), NotSupported,
              "AllReduce algorithm " << algorithm_name(call.algorithm) << " needs a power-of-two world size, got "
                                     << comm.world_size);
  return call.count * elem;
}

}  // namespace allreduce

struct AllReduce::State {
  SymmetricBuffer scratch;  // one region per algorithm, see NOTE [AllReduce regions]
  SymmetricBuffer flags;    // kFlagRegionWords per algorithm
  size_t region_offset[kNumKernels] = {};
  size_t capacity[kNumKernels] = {};
  allreduce::EpochState* epoch = nullptr;
  size_t one_shot_max_bytes = 0;  // kAuto: largest call taking one-shot
  size_t ll_max_bytes = 0;        // one-shot: largest call using the LL protocol
};

// NOTE [AllReduce regions]
// Each algorithm owns a disjoint scratch region and flag region. Consecutive
// calls may use different algorithms, and a slow peer may still be reading the
// previous call's region when a fast rank starts the next call; each algorithm's
// own reuse argument (see its NOTE) covers calls two apart, because every
// algorithm's completion on one rank implies every rank started that call.
AllReduce::AllReduce(Communicator& comm, size_t max_bytes, AllReduceOptions options)
    : comm_(comm), max_bytes_(max_bytes), options_(options), state_(std::make_unique<State>()) {
  FERRY_ARG_CHECK(max_bytes > 0, "AllReduce: max_bytes must be > 0");
  comm_.check();
  const int world = comm_.size();
  using namespace allreduce;
  const size_t caps[kNumKernels] = {one_shot_capacity(max_bytes), two_shot_capacity(max_bytes),
                                    ring_capacity(max_bytes), recursive_doubling_capacity(max_bytes),
                                    one_shot_ll_capacity(max_bytes)};
  const size_t sizes[kNumKernels] = {
      one_shot_scratch_bytes(caps[0], world), two_shot_scratch_bytes(caps[1], world),
      ring_scratch_bytes(caps[2], world), recursive_doubling_scratch_bytes(caps[3], world),
      one_shot_ll_scratch_bytes(caps[4], world)};
  size_t total = 0;
  for (int a = 0; a < kNumKernels; ++a) {
    state_->capacity[a] = caps[a];
    state_->region_offset[a] = total;
    total += round_up(sizes[a], 4096);
  }
  state_->scratch = comm_.heap().allocate(total);
  state_->flags = comm_.heap().allocate(kNumKernels * kFlagRegionWords * sizeof(uint64_t));
  FERRY_CUDA_CHECK(cudaMalloc(&state_->epoch, sizeof(EpochState)));
  FERRY_CUDA_CHECK(cudaMemset(state_->epoch, 0, sizeof(EpochState)));
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  // kAuto threshold between one-shot and two-shot (ferry-bench, bf16 and fp32).
  // 4xH200: one-shot wins up to 512 KB, two-shot from 1 MB (15.2 vs 16.1 us).
  // 2xH200: one-shot wins up to 2 MB (13.2 vs 15.6 us), two-shot from 4 MB.
  // One-shot moves (n-1)/2 x the bytes of two-shot per link but saves one flag
  // exchange, so the crossover falls as n grows; the 8-rank value is scaled from
  // the 4-rank one, not measured. 2 MB is also one-shot's largest single launch.
  const size_t default_one_shot = world <= 2 ? (size_t{2} << 20) : world <= 4 ? (size_t{512} << 10) : (size_t{256} << 10);
  state_->one_shot_max_bytes = env_size("FERRY_ALLREDUCE_ONE_SHOT_MAX_BYTES", default_one_shot);
  // One-shot switches to the LL protocol (no fence, no flag; 2x the bytes) at
  // and below this size; FERRY_ALLREDUCE_LL_MAX_BYTES=0 turns it off. 4xH200,
  // bf16, LL vs fenced one-shot: 4 KB 5.2 vs 5.7 us, 8 KB 5.8 vs 6.1, 16 KB 6.1
  // vs 6.2, 32 KB 6.9 vs 6.3, 64 KB 8.3 vs 6.6.
  state_->ll_max_bytes =
      std::min(env_size("FERRY_ALLREDUCE_LL_MAX_BYTES", size_t{16} << 10), state_->capacity[kOneShotLlKernel]);
}

AllReduce::~AllReduce() {
  if (state_ && state_->epoch) cudaFree(state_->epoch);
  // Symmetric buffers are released with the heap (collective release is not
  // safe in a destructor).
}

bool AllReduce::supports(AllReduceAlgorithm algorithm) const {
  return allreduce::algorithm_supported(
      algorithm, {max_bytes_, comm_.size(), comm_.topology().num_nodes == 1});
}

AllReduceAlgorithm AllReduce::select(size_t bytes) const {
  return bytes <= state_->one_shot_max_bytes ? AllReduceAlgorithm::kOneShot : AllReduceAlgorithm::kTwoShot;
}

void AllReduce::run(const void* in, void* out, size_t count, DataType type, ReduceOp op, cudaStream_t stream,
                    AllReduceAlgorithm algorithm) {
  comm_.check();
  const allreduce::CommShape shape{max_bytes_, comm_.size(), comm_.topology().num_nodes == 1};
  const size_t bytes = allreduce::validate_call({in, out, count, type, op, algorithm}, shape);
  if (algorithm == AllReduceAlgorithm::kAuto) algorithm = select(bytes);
  const size_t elem = dtype_size(type);

  if (comm_.size() == 1) {  // nothing to exchange; every op of one value is the value
    if (in != out) FERRY_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }

  const int a = algorithm == AllReduceAlgorithm::kOneShot && bytes <= state_->ll_max_bytes
                    ? kOneShotLlKernel
                    : kernel_index(algorithm);
  allreduce::Params p{};
  p.world_size = comm_.size();
  p.rank = comm_.rank();
  for (int r = 0; r < comm_.size(); ++r) {
    p.scratch[r] = static_cast<char*>(state_->scratch.peer(r)) + state_->region_offset[a];
    p.flags[r] = static_cast<uint64_t*>(state_->flags.peer(r)) + a * allreduce::kFlagRegionWords;
  }
  p.capacity_bytes = state_->capacity[a];
  p.epoch = state_->epoch;
  p.wait = WaitContext{comm_.device_error_state(), comm_.device_abort_flag(), comm_.timeout_ns(), comm_.rank()};
  const int num_sms = options_.max_blocks > 0 ? std::min(options_.max_blocks, comm_.num_sms()) : comm_.num_sms();

  // Split into launches of at most the algorithm's capacity (a multiple of 16
  // bytes, so every piece keeps the pointers' alignment).
  const size_t piece_elems = state_->capacity[a] / elem;
  for (size_t done = 0; done < count; done += piece_elems) {
    p.count = std::min(piece_elems, count - done);
    p.in = static_cast<const char*>(in) + done * elem;
    p.out = static_cast<char*>(out) + done * elem;
    p.aligned = device_aligned(p.in) && device_aligned(p.out);
    switch (algorithm) {
      case AllReduceAlgorithm::kOneShot:
        if (a == kOneShotLlKernel)
          allreduce::launch_one_shot_ll(p, type, op, num_sms, stream);
        else
          allreduce::launch_one_shot(p, type, op, num_sms, stream);
        break;
      case AllReduceAlgorithm::kTwoShot: allreduce::launch_two_shot(p, type, op, num_sms, stream); break;
      case AllReduceAlgorithm::kRing: allreduce::launch_ring(p, type, op, num_sms, stream); break;
      case AllReduceAlgorithm::kRecursiveDoubling:
        allreduce::launch_recursive_doubling(p, type, op, num_sms, stream);
        break;
      case AllReduceAlgorithm::kAuto: break;  // resolved above
    }
  }
}

}  // namespace ferry
