// AllReduce host side: argument checks, algorithm choice, scratch layout and
// splitting a call into launches each algorithm's scratch can carry.
#include "ferry/allreduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "allreduce/layout.hpp"
#include "common/env.hpp"
#include "allreduce/validate.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "memory/peer_ptrs.hpp"

namespace ferry {

namespace allreduce {
namespace {

// Every kernel with its own scratch and flag region. The order is the layout:
// region i of the scratch and of the flags belongs to entry i (NOTE [AllReduce
// regions]); public entries in enum order, then the internal ones.
constexpr size_t kNumAlgorithms = 5;
const std::array<const AlgorithmEntry*, kNumAlgorithms>& algorithms() {
  static constexpr std::array<const AlgorithmEntry*, kNumAlgorithms> kAll = {
      &kOneShotEntry, &kTwoShotEntry, &kRingEntry, &kRecursiveDoublingEntry, &kOneShotLlEntry};
  return kAll;
}

// The entry users name `algorithm` by; nullptr for kAuto and unknown values.
const AlgorithmEntry* public_entry(AllReduceAlgorithm algorithm) {
  for (const AlgorithmEntry* entry : algorithms())
    if (!entry->internal && entry->algorithm == algorithm) return entry;
  return nullptr;
}

// Position of `entry` in algorithms(): the index of its regions.
size_t region_index(const AlgorithmEntry& entry) {
  const auto& all = algorithms();
  return static_cast<size_t>(std::find(all.begin(), all.end(), &entry) - all.begin());
}

}  // namespace
}  // namespace allreduce

namespace {

bool device_aligned(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

const char* algorithm_name(AllReduceAlgorithm algorithm) {
  if (algorithm == AllReduceAlgorithm::kAuto) return "auto";
  const allreduce::AlgorithmEntry* entry = allreduce::public_entry(algorithm);
  return entry != nullptr ? entry->name : "unknown";
}

AllReduceAlgorithm algorithm_from_string(const std::string& name) {
  if (name == algorithm_name(AllReduceAlgorithm::kAuto)) return AllReduceAlgorithm::kAuto;
  std::string expected = algorithm_name(AllReduceAlgorithm::kAuto);
  for (const allreduce::AlgorithmEntry* entry : allreduce::algorithms()) {
    if (entry->internal) continue;
    if (name == entry->name) return entry->algorithm;
    for (const char* alias : entry->aliases)
      if (alias != nullptr && name == alias) return entry->algorithm;
    expected += std::string(", ") + entry->name;
  }
  FERRY_THROW(InvalidArgument, "unknown allreduce algorithm '" << name << "' (expected " << expected << ")");
}

namespace allreduce {

size_t tuning_knob(const char* name) { return env_size(name, 0); }

bool algorithm_supported(AllReduceAlgorithm algorithm, const CommShape& comm) {
  if (!comm.single_node || comm.world_size > kMaxNodeRanks) return false;
  if (algorithm == AllReduceAlgorithm::kAuto) return true;  // picks one-shot or two-shot: any size
  const AlgorithmEntry* entry = public_entry(algorithm);
  return entry != nullptr && entry->supported(comm.world_size);
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
  FERRY_CHECK(comm.world_size <= kMaxNodeRanks, NotSupported,
              "AllReduce supports at most " << kMaxNodeRanks << " ranks in a node, got " << comm.world_size);
  FERRY_CHECK(algorithm_supported(call.algorithm, comm), NotSupported,
              "AllReduce algorithm " << algorithm_name(call.algorithm) << " needs a power-of-two world size, got "
                                     << comm.world_size);
  return call.count * elem;
}

}  // namespace allreduce

struct AllReduce::State {
  SymmetricBuffer scratch;  // one region per algorithm, see NOTE [AllReduce regions]
  SymmetricBuffer flags;    // kFlagRegionWords per algorithm
  // By region index (allreduce::algorithms()).
  size_t region_offset[allreduce::kNumAlgorithms] = {};
  size_t capacity[allreduce::kNumAlgorithms] = {};
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
// Regions follow allreduce::algorithms(), in that order, in both buffers.
AllReduce::AllReduce(Communicator& comm, size_t max_bytes, AllReduceOptions options)
    : comm_(comm), max_bytes_(max_bytes), options_(options), state_(std::make_unique<State>()) {
  FERRY_ARG_CHECK(max_bytes > 0, "AllReduce: max_bytes must be > 0");
  comm_.check();
  const int world = comm_.size();
  using namespace allreduce;
  // Every algorithm gets its regions, supported on this world size or not.
  size_t total = 0;
  for (size_t a = 0; a < kNumAlgorithms; ++a) {
    const AlgorithmEntry& entry = *algorithms()[a];
    state_->capacity[a] = entry.capacity(max_bytes);
    state_->region_offset[a] = total;
    total += round_up(entry.scratch_bytes(state_->capacity[a], world), 4096);
  }
  state_->scratch = comm_.heap().allocate(total);
  state_->flags = comm_.heap().allocate(kNumAlgorithms * kFlagRegionWords * sizeof(uint64_t));
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
      std::min(env_size("FERRY_ALLREDUCE_LL_MAX_BYTES", size_t{16} << 10),
               state_->capacity[region_index(kOneShotLlEntry)]);
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

  // One-shot calls up to ll_max_bytes run its LL protocol, in its own regions.
  const allreduce::AlgorithmEntry& entry = algorithm == AllReduceAlgorithm::kOneShot && bytes <= state_->ll_max_bytes
                                               ? allreduce::kOneShotLlEntry
                                               : *allreduce::public_entry(algorithm);
  const size_t a = allreduce::region_index(entry);
  // The group is the node (validate_call: single node), so the peer tables are
  // indexed by local rank, which is the rank here.
  const Topology& topology = comm_.topology();
  allreduce::Params p{};
  p.scratch = peer_ptrs<char>(state_->scratch, topology.ranks_in_node, state_->region_offset[a]);
  p.flags.region =
      peer_ptrs<uint64_t>(state_->flags, topology.ranks_in_node, a * allreduce::kFlagRegionWords * sizeof(uint64_t));
  p.flags.rank = topology.local_rank;
  p.flags.world_size = static_cast<int32_t>(topology.ranks_in_node.size());
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
    entry.launch(p, type, op, num_sms, stream);
  }
}

}  // namespace ferry
