// AllReduce host side: the table of algorithms, argument checks, algorithm
// choice, scratch layout and splitting a call into launches each algorithm's
// scratch can carry; across nodes, the entry that spans them (hierarchical,
// hierarchical_entry.cpp) brings its own memory and call.
#include "ferry/allreduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce/allreduce_params.hpp"
#include "allreduce/allreduce_args.hpp"
#include "common/dependent_launch.hpp"
#include "common/knobs.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/device/epoch_tag.hpp"
#include "ferry/error.hpp"
#include "memory/node_region.hpp"

namespace ferry {

namespace allreduce {
namespace {

// NOTE [AllReduce regions] (below). The table of every algorithm: first the
// NVLink entries, which own a scratch and a flag region each, in this order
// (public entries in enum order, then the internal ones); then the entries that
// span nodes, which bring their own memory (setup) instead.
constexpr size_t kNumAlgorithms = 8;
const std::array<const AlgorithmEntry*, kNumAlgorithms>& algorithms() {
  static constexpr std::array<const AlgorithmEntry*, kNumAlgorithms> kAll = {
      &kOneShotEntry, &kTwoShotEntry, &kRingEntry, &kRecursiveDoublingEntry, &kOneShotLlEntry,
      &kOneShotPipelinedEntry, &kOneShotLl128Entry, &kHierarchicalEntry};
  return kAll;
}

// The entry users name `algorithm` by; nullptr for kAuto and unknown values.
const AlgorithmEntry* public_entry(AllReduceAlgorithm algorithm) {
  for (const AlgorithmEntry* entry : algorithms())
    if (!entry->internal && entry->algorithm == algorithm) return entry;
  return nullptr;
}

// The entry whose requirements kAuto has on a communicator of this shape: the
// first public entry of its kind (one-shot inside a node, hierarchical across
// nodes); select() picks among the entries of that kind.
const AlgorithmEntry* auto_entry(const CommShape& comm) {
  for (const AlgorithmEntry* entry : algorithms())
    if (!entry->internal && entry->spans_nodes != comm.single_node) return entry;
  return nullptr;
}

// The entry a call names (kAuto: auto_entry), or nullptr for unknown values.
const AlgorithmEntry* entry_for(AllReduceAlgorithm algorithm, const CommShape& comm) {
  return algorithm == AllReduceAlgorithm::kAuto ? auto_entry(comm) : public_entry(algorithm);
}

// Position of `entry` in algorithms().
size_t table_index(const AlgorithmEntry& entry) {
  const auto& all = algorithms();
  return static_cast<size_t>(std::find(all.begin(), all.end(), &entry) - all.begin());
}

// Index of an NVLink entry's regions: its position among the NVLink entries.
size_t region_index(const AlgorithmEntry& entry) {
  size_t index = 0;
  for (const AlgorithmEntry* e : algorithms()) {
    if (e == &entry) break;
    if (!e->spans_nodes) ++index;
  }
  return index;
}

size_t num_regions() { return region_index(*algorithms().back()) + (algorithms().back()->spans_nodes ? 0 : 1); }

// "a, b or c": the public entries of one kind (spans_nodes), after `first` if given.
std::string entry_names(bool spans_nodes, const char* first) {
  std::vector<std::string> names;
  if (first != nullptr) names.emplace_back(first);
  for (const AlgorithmEntry* entry : algorithms())
    if (!entry->internal && entry->spans_nodes == spans_nodes) names.emplace_back(entry->name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// Why `entry` cannot run on a communicator of the other kind (one node, or several).
std::string wrong_kind(const AlgorithmEntry& entry, const CommShape& comm) {
  std::ostringstream os;
  if (entry.spans_nodes)
    os << "AllReduce algorithm " << entry.name << " runs across nodes, but all " << comm.world_size
       << " ranks share one node: inside a node use " << entry_names(false, "auto");
  else
    os << "AllReduce algorithm " << entry.name << " needs all ranks in one node (NVLink), but the " << comm.world_size
       << " ranks span " << comm.num_nodes << " nodes: across nodes use " << entry_names(true, nullptr)
       << " (or auto, which picks it)";
  return os.str();
}

}  // namespace

size_t ll128_max_bytes() { return knobs::kAllReduceLl128MaxBytes.read_or(size_t{6} << 20); }

std::string fits_one_node(const CommShape& comm) {
  if (comm.world_size <= kMaxNodeRanks) return "";
  return "AllReduce supports at most " + std::to_string(kMaxNodeRanks) + " ranks in a node, got " +
         std::to_string(comm.world_size);
}

LaunchTuning launch_tuning_from_env() {
  LaunchTuning t;
  t.one_shot_packs_per_thread = static_cast<size_t>(knobs::kOneShotPacksPerThread.value());
  t.one_shot_blocks = static_cast<size_t>(knobs::kOneShotBlocks.value());
  t.one_shot_ll_blocks = static_cast<size_t>(knobs::kOneShotLlBlocks.value());
  t.one_shot_ll_threads = static_cast<size_t>(knobs::kOneShotLlThreads.value()) / 32 * 32;
  t.two_shot_blocks = static_cast<size_t>(knobs::kTwoShotBlocks.value());
  t.two_shot_max_chunk_packs = knobs::kTwoShotMaxChunkPacks.value();
  t.two_shot_variant = knobs::kTwoShotVariant.value() == knobs::TwoShotVariant::kPull ? 0 : 1;
  t.one_shot_pipelined_step_packs = knobs::kOneShotPipelinedStepPacks.value();
  return t;
}

}  // namespace allreduce

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

CommShape comm_shape(size_t max_bytes, const Topology& topology) {
  return CommShape{max_bytes, topology.size, topology.num_nodes == 1, topology.num_nodes, topology.ranks_per_node};
}

bool algorithm_supported(AllReduceAlgorithm algorithm, const CommShape& comm) {
  const AlgorithmEntry* entry = entry_for(algorithm, comm);
  return entry != nullptr && entry->spans_nodes != comm.single_node && entry->unsupported(comm).empty();
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
  // One table lookup: the entry the call names (auto: the requirements of its kind).
  const AlgorithmEntry& entry = *entry_for(call.algorithm, comm);
  FERRY_CHECK(entry.spans_nodes != comm.single_node, NotSupported, wrong_kind(entry, comm));
  const std::string why = entry.unsupported(comm);
  if (!why.empty()) FERRY_THROW(NotSupported, why);
  return call.count * elem;
}

}  // namespace allreduce

struct AllReduce::State {
  allreduce::CommShape shape{};
  // By region index (allreduce::region_index), see NOTE [AllReduce regions] (one node only).
  SymmetricBuffer scratch[allreduce::kNumAlgorithms];  // empty where an entry needs none
  SymmetricBuffer flags;  // kFlagRegionWords per NVLink algorithm (one node only)
  size_t scratch_bytes[allreduce::kNumAlgorithms] = {};
  size_t capacity[allreduce::kNumAlgorithms] = {};
  allreduce::EpochState* epoch = nullptr;
  size_t one_shot_max_bytes = 0;  // kAuto: largest call taking one-shot
  size_t ll128_max_bytes = 0;     // one-shot on two ranks: largest call using the LL128 protocol (0: none)
  size_t ll_max_bytes = 0;        // one-shot: largest call using the LL protocol
  size_t pipelined_min_bytes = 0; // one-shot on two ranks: calls above it run pipelined (SIZE_MAX: never)
  allreduce::LaunchTuning tuning{};
  // By position in allreduce::algorithms(): the memory of the entries that bring
  // their own (across nodes: ranks in several nodes of equal size; else none).
  std::unique_ptr<allreduce::AlgorithmState> own[allreduce::kNumAlgorithms];
};

// NOTE [AllReduce regions]
// Each NVLink algorithm owns a scratch region (its own allocation, so adding a
// large region never moves or resizes the others: with the pipelined one-shot's
// 64 MiB inside one shared allocation, LL calls of 4-16 KB took 4% longer on
// 2xH200, kernels unchanged) and a flag region.
// Consecutive calls may use different algorithms, and a slow peer may still be
// reading the previous call's region when a fast rank starts the next call; each
// algorithm's own reuse argument (see its NOTE) covers calls two apart, because
// every algorithm's completion on one rank implies every rank started that call.
// Flag regions follow the NVLink entries of allreduce::algorithms(), in that
// order. Entries that span nodes have no region: their setup makes their memory
// (NOTE [Hierarchical AllReduce setup]), so a single-node AllReduce allocates
// only the regions and a multi-node one only that memory.
AllReduce::AllReduce(Communicator& comm, size_t max_bytes, AllReduceOptions options)
    : comm_(comm), max_bytes_(max_bytes), options_(options), state_(std::make_unique<State>()) {
  FERRY_ARG_CHECK(max_bytes > 0, "AllReduce: max_bytes must be > 0");
  comm_.check();
  const int world = comm_.size();
  using namespace allreduce;
  state_->shape = comm_shape(max_bytes, comm_.topology());
  // Every NVLink algorithm gets its regions, supported on this world size or not.
  for (const AlgorithmEntry* entry : algorithms()) {
    if (entry->spans_nodes) continue;
    const size_t r = region_index(*entry);
    state_->capacity[r] = entry->capacity(max_bytes);
    state_->scratch_bytes[r] = entry->scratch_bytes(state_->capacity[r], world);
  }
  // Knobs (src/common/knobs.hpp), read before any collective allocation.
  // kAuto threshold between one-shot and two-shot (ferry-bench, bf16 and fp32).
  // 4xH200: one-shot wins up to 512 KB, two-shot from 1 MB (15.2 vs 16.1 us).
  // 2xH200: one-shot wins up to 2 MB (13.2 vs 15.6 us), two-shot from 4 MB.
  // One-shot moves (n-1)/2 x the bytes of two-shot per link but saves one flag
  // exchange, so the crossover falls as n grows; the 8-rank value is scaled from
  // the 4-rank one, not measured. 2 MB is also one-shot's largest single launch;
  // on two ranks one-shot calls above FERRY_ALLREDUCE_PIPELINED_MIN_BYTES (2 MiB)
  // run the pipelined one-shot, one launch up to 32 MiB: 2xH100, bf16, vs
  // two-shot 4 MB 22.4 vs 23.7 us, 16 MB 62.0 vs 64.8, 32 MB 111.6 vs 116.8.
  const size_t default_one_shot = world <= 2 ? (size_t{32} << 20) : world <= 4 ? (size_t{512} << 10) : (size_t{256} << 10);
  state_->one_shot_max_bytes = knobs::kAllReduceOneShotMaxBytes.read_or(default_one_shot);
  // One-shot switches to the LL protocol (no fence, no flag; 2x the bytes) at
  // and below this size; FERRY_ALLREDUCE_LL_MAX_BYTES=0 turns it off. 4xH200,
  // bf16, LL vs fenced one-shot: 4 KB 5.2 vs 5.7 us, 8 KB 5.8 vs 6.1, 16 KB 6.1
  // vs 6.2, 32 KB 6.9 vs 6.3, 64 KB 8.3 vs 6.6. Two ranks (one peer, so twice
  // the bytes of one copy), 2xH100, bf16, LL vs fenced: 32 KB 5.0 vs 6.2 us,
  // 64 KB 5.3 vs 6.3, 128 KB 5.9 vs 6.5: LL up to 128 KiB there. Above it two ranks take the LL128 one-shot
  // (below), which beats LL from 128 KiB on (2xH200, session 40 c3, LL128 against LL: 32 KiB 1.16, 64 KiB 1.05,
  // 128 KiB 0.96 of LL's time): LL up to 64 KiB on two ranks.
  const size_t default_ll = world <= 2 ? (size_t{64} << 10) : (size_t{16} << 10);
  state_->ll_max_bytes = std::min<size_t>(knobs::kAllReduceLlMaxBytes.read_or(default_ll),
                                          state_->capacity[region_index(kOneShotLlEntry)]);
  state_->tuning = launch_tuning_from_env();
  state_->tuning.dependent_launch =  // NOTE [AllReduce launches]
      knobs::kAllReducePdl.value() && supports_dependent_launch(comm_.device()) && comm_.ranks_sharing_device() <= 1;
  // Two ranks: one-shot calls above the LL range and up to its capacity (FERRY_ALLREDUCE_LL128_MAX_BYTES, 6 MiB)
  // take the LL128 one-shot (NOTE [LL128 lines]). 2xH200 (session 40 c2), bf16, auto with LL128 against the fenced
  // and pipelined one-shots: 256 KiB 0.891, 512 KiB 0.873, 1 MiB 0.895, 2 MiB 0.911, 3 MiB 0.913, 4 MiB 0.960,
  // 6 MiB 0.985, 8 MiB 1.032 of their time: the 8-byte flag of each 128-byte line costs less than a fence and a
  // flag round trip until the bytes dominate.
  state_->ll128_max_bytes = kOneShotLl128Entry.unsupported(state_->shape).empty() &&
                                    state_->scratch_bytes[region_index(kOneShotLl128Entry)] > 0
                                ? state_->capacity[region_index(kOneShotLl128Entry)]
                                : 0;
  // Two ranks: one-shot calls above this (and above the LL128 range) run pipelined (NOTE [Pipelined one-shot]).
  state_->pipelined_min_bytes = kOneShotPipelinedEntry.unsupported(state_->shape).empty()
                                    ? knobs::kAllReducePipelinedMinBytes.read_or(size_t{2} << 20)
                                    : SIZE_MAX;

  if (state_->shape.single_node) {
    for (size_t r = 0; r < num_regions(); ++r)
      if (state_->scratch_bytes[r] > 0) state_->scratch[r] = comm_.heap().allocate(state_->scratch_bytes[r]);
    state_->flags = comm_.heap().allocate(num_regions() * kFlagRegionWords * sizeof(uint64_t));
  }
  // Across nodes only the entries that span them run: their own memory, not the
  // NVLink scratch (NOTE [Hierarchical AllReduce setup]).
  for (const AlgorithmEntry* entry : algorithms())
    if (entry->setup != nullptr && entry->spans_nodes != state_->shape.single_node &&
        entry->unsupported(state_->shape).empty())
      state_->own[table_index(*entry)] = entry->setup(comm_, max_bytes, options_);
  FERRY_CUDA_CHECK(cudaMalloc(&state_->epoch, sizeof(EpochState)));
  FERRY_CUDA_CHECK(cudaMemset(state_->epoch, 0, sizeof(EpochState)));
  if (const uint64_t first_epoch = knobs::kAllReduceFirstEpoch.value(); first_epoch != 0) {
    // The counter holds the launches done; the first launch reads the one after (NOTE [AllReduce epoch]).
    const uint64_t done = device::epoch_after(first_epoch) - 1;
    FERRY_CUDA_CHECK(cudaMemcpy(&state_->epoch->epoch, &done, sizeof(done), cudaMemcpyHostToDevice));
  }
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
}

AllReduce::~AllReduce() {
  if (state_)
    for (auto& own : state_->own) own.reset();  // waits for this rank's kernels and transfers
  if (state_ && state_->epoch) cudaFree(state_->epoch);
  // Symmetric buffers are released with the heap (collective release is not
  // safe in a destructor).
}

bool AllReduce::supports(AllReduceAlgorithm algorithm) const {
  return allreduce::algorithm_supported(algorithm, state_->shape);
}

AllReduceAlgorithm AllReduce::select(size_t bytes) const {
  // Across nodes, the entry that spans them (hierarchical); inside a node, by size.
  const allreduce::AlgorithmEntry& entry = *allreduce::auto_entry(state_->shape);
  if (entry.spans_nodes) return entry.algorithm;
  return bytes <= state_->one_shot_max_bytes ? AllReduceAlgorithm::kOneShot : AllReduceAlgorithm::kTwoShot;
}

size_t AllReduce::window_bytes() const {
  size_t bytes = 0;
  for (const auto& own : state_->own)
    if (own) bytes += own->window_bytes();
  return bytes;
}

void AllReduce::run(const void* in, void* out, size_t count, DataType type, ReduceOp op, cudaStream_t stream,
                    AllReduceAlgorithm algorithm) {
  comm_.check();
  const size_t bytes = allreduce::validate_call({in, out, count, type, op, algorithm}, state_->shape);
  if (algorithm == AllReduceAlgorithm::kAuto) algorithm = select(bytes);
  // validate_call passed: a public entry of this communicator's kind.
  const allreduce::AlgorithmEntry* entry = allreduce::public_entry(algorithm);

  if (entry->spans_nodes) {
    // Several nodes of equal size (validate_call), so its setup ran.
    allreduce::AlgorithmState* own = state_->own[allreduce::table_index(*entry)].get();
    FERRY_CHECK(own != nullptr, Error, "AllReduce: the " << entry->name << " algorithm has no window");
    entry->run(*own, in, out, count, type, op, stream);
    return;
  }

  if (comm_.size() == 1) {  // nothing to exchange; every op of one value is the value
    if (in != out) FERRY_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }

  // One-shot calls up to ll_max_bytes run its LL protocol, in its own regions.
  // Two ranks: larger ones up to ll128_max_bytes run the LL128 one-shot, and above it those above
  // pipelined_min_bytes run pipelined.
  if (algorithm == AllReduceAlgorithm::kOneShot) {
    if (bytes <= state_->ll_max_bytes)
      entry = &allreduce::kOneShotLlEntry;
    else if (bytes <= state_->ll128_max_bytes)
      entry = &allreduce::kOneShotLl128Entry;
    else if (bytes > state_->pipelined_min_bytes)
      entry = &allreduce::kOneShotPipelinedEntry;
  }
  const size_t a = allreduce::region_index(*entry);
  const size_t elem = dtype_size(type);
  // The group is the node (validate_call: single node), so the peer tables are
  // indexed by local rank, which is the rank here.
  const Topology& topology = comm_.topology();
  allreduce::Params p{};
  p.scratch = node_region<char>(state_->scratch[a], topology.ranks_in_node, 0);
  p.flags.region =
      node_region<uint64_t>(state_->flags, topology.ranks_in_node, a * allreduce::kFlagRegionWords * sizeof(uint64_t));
  p.flags.rank = topology.local_rank;
  p.flags.world_size = static_cast<int32_t>(topology.ranks_in_node.size());
  p.capacity_bytes = state_->capacity[a];
  p.epoch = state_->epoch;
  p.wait = WaitContext{comm_.device_error_state(), comm_.device_abort_flag(), comm_.timeout_ns(), comm_.rank()};
  // Grids within the SM budget, the same on every rank (NOTE [SM budget], communicator.hpp).
  const int budget = comm_.sm_budget();
  const int num_sms = options_.max_blocks > 0 ? std::min(options_.max_blocks, budget) : budget;

  // Split into launches of at most the algorithm's capacity (a multiple of 16
  // bytes, so every piece keeps the pointers' alignment).
  const size_t piece_elems = state_->capacity[a] / elem;
  for (size_t done = 0; done < count; done += piece_elems) {
    p.count = std::min(piece_elems, count - done);
    p.in = static_cast<const char*>(in) + done * elem;
    p.out = static_cast<char*>(out) + done * elem;
    p.aligned = allreduce::device_aligned(p.in) && allreduce::device_aligned(p.out);
    entry->launch(p, state_->tuning, type, op, num_sms, stream);
  }
}

}  // namespace ferry
