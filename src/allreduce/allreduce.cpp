// AllReduce host side: argument checks, algorithm choice, scratch layout and
// splitting a call into launches each algorithm's scratch can carry; across
// nodes, the hierarchical algorithm's window.
#include "ferry/allreduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "allreduce/hierarchical.hpp"
#include "allreduce/layout.hpp"
#include "common/env.hpp"
#include "allreduce/validate.hpp"
#include "ferry/communicator.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/window.hpp"
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
  if (algorithm == AllReduceAlgorithm::kHierarchical) return allreduce::kHierarchicalName;
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
  if (name == allreduce::kHierarchicalName) return AllReduceAlgorithm::kHierarchical;
  expected += std::string(", ") + allreduce::kHierarchicalName;
  FERRY_THROW(InvalidArgument, "unknown allreduce algorithm '" << name << "' (expected " << expected << ")");
}

namespace allreduce {

size_t tuning_knob(const char* name) { return env_size(name, 0); }

CommShape comm_shape(size_t max_bytes, const Topology& topology) {
  return CommShape{max_bytes, topology.size, topology.num_nodes == 1, topology.num_nodes, topology.ranks_per_node};
}

namespace {
// Several nodes, each with the same number of ranks, within the kernel's tables.
bool hierarchical_fits(const CommShape& comm) {
  return !comm.single_node && comm.num_nodes >= 2 && comm.num_nodes <= kMaxNodes && comm.ranks_per_node >= 1 &&
         comm.ranks_per_node <= kMaxNodeRanks && comm.num_nodes * comm.ranks_per_node == comm.world_size;
}
}  // namespace

bool algorithm_supported(AllReduceAlgorithm algorithm, const CommShape& comm) {
  if (algorithm == AllReduceAlgorithm::kHierarchical) return hierarchical_fits(comm);
  if (!comm.single_node) return algorithm == AllReduceAlgorithm::kAuto && hierarchical_fits(comm);
  if (comm.world_size > kMaxNodeRanks) return false;
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
  if (!comm.single_node) {
    FERRY_CHECK(call.algorithm == AllReduceAlgorithm::kAuto || call.algorithm == AllReduceAlgorithm::kHierarchical,
                NotSupported,
                "AllReduce algorithm " << algorithm_name(call.algorithm)
                                       << " needs all ranks in one node (NVLink), but the " << comm.world_size
                                       << " ranks span " << comm.num_nodes
                                       << " nodes: across nodes use hierarchical (or auto, which picks it)");
    FERRY_CHECK(comm.ranks_per_node > 0 && comm.num_nodes * comm.ranks_per_node == comm.world_size, NotSupported,
                "AllReduce across nodes (hierarchical) needs the same number of ranks in every node; the "
                    << comm.world_size << " ranks span " << comm.num_nodes << " nodes of different sizes");
    FERRY_CHECK(comm.num_nodes >= 2 && comm.num_nodes <= kMaxNodes, NotSupported,
                "AllReduce across nodes (hierarchical) supports 2 to " << kMaxNodes << " nodes, got "
                                                                       << comm.num_nodes);
    FERRY_CHECK(comm.ranks_per_node <= kMaxNodeRanks, NotSupported,
                "AllReduce across nodes (hierarchical) supports at most " << kMaxNodeRanks
                                                                          << " ranks in a node, got "
                                                                          << comm.ranks_per_node);
    return call.count * elem;
  }
  FERRY_CHECK(call.algorithm != AllReduceAlgorithm::kHierarchical, NotSupported,
              "AllReduce algorithm " << kHierarchicalName << " runs across nodes, but all " << comm.world_size
                                     << " ranks share one node: inside a node use auto, one_shot, two_shot, ring "
                                        "or recursive_doubling");
  FERRY_CHECK(comm.world_size <= kMaxNodeRanks, NotSupported,
              "AllReduce supports at most " << kMaxNodeRanks << " ranks in a node, got " << comm.world_size);
  FERRY_CHECK(algorithm_supported(call.algorithm, comm), NotSupported,
              "AllReduce algorithm " << algorithm_name(call.algorithm) << " needs a power-of-two world size, got "
                                     << comm.world_size);
  return call.count * elem;
}

}  // namespace allreduce

struct AllReduce::State {
  allreduce::CommShape shape{};
  SymmetricBuffer scratch;  // one region per algorithm, see NOTE [AllReduce regions] (one node only)
  SymmetricBuffer flags;    // kFlagRegionWords per algorithm (one node only)
  // By region index (allreduce::algorithms()).
  size_t region_offset[allreduce::kNumAlgorithms] = {};
  size_t capacity[allreduce::kNumAlgorithms] = {};
  allreduce::EpochState* epoch = nullptr;
  size_t one_shot_max_bytes = 0;  // kAuto: largest call taking one-shot
  size_t ll_max_bytes = 0;        // one-shot: largest call using the LL protocol
  // Hierarchical (ranks in several nodes of equal size only; else none of it).
  std::unique_ptr<Window> window;
  allreduce::EpochState* hierarchical_epoch = nullptr;
  allreduce::HierarchicalParams hierarchical{};  // all but the call's pointers and count
  size_t hierarchical_capacity = 0;               // user bytes per launch
  int hierarchical_blocks = 0;                    // most blocks per launch, the same on every rank
};

namespace {

// NOTE [Hierarchical AllReduce setup]
// Only a communicator whose ranks span nodes (of equal size) gets the window, so
// a single-node AllReduce allocates exactly what it did before. Every rank must
// agree on the capacity per launch and the most blocks per launch (the layout
// and the grid of each launch depend on them): the smallest of every rank's
// choice. Every instantiation of the kernel is loaded here, before any of them
// can wait on the proxy: under lazy module loading, the first launch of another
// instantiation behind a running one (a bf16 call queued behind a float call,
// say) would load its module while the running kernel waits on the proxy, and
// the driver lock that takes stalls the proxy's CUDA calls (its staging copies):
// a hang until the timeout (docs/internode.md, "Lazy module loading").
void setup_hierarchical(Communicator& comm, size_t max_bytes, const AllReduceOptions& options,
                        std::unique_ptr<Window>& window, allreduce::EpochState*& epoch,
                        allreduce::HierarchicalParams& p, size_t& capacity, int& max_blocks) {
  using namespace allreduce;
  const Topology& topology = comm.topology();
  const int num_nodes = topology.num_nodes, local_size = topology.local_size;
  capacity = hierarchical_capacity(max_bytes, num_nodes, local_size, tuning_knob("FERRY_HIERARCHICAL_LAUNCH_BYTES"));
  max_blocks = std::min(kHierarchicalMaxBlocks, std::max(comm.sm_budget(), 1));
  if (options.max_blocks > 0) max_blocks = std::min(max_blocks, options.max_blocks);
  struct Choice {
    uint64_t capacity;
    int32_t max_blocks;
    int32_t reserved;
  };
  for (const Choice& c : comm.bootstrap().all_gather_value(Choice{capacity, max_blocks, 0})) {
    capacity = std::min<size_t>(capacity, c.capacity);
    max_blocks = std::min<int>(max_blocks, c.max_blocks);
  }
  const HierarchicalLayout layout = hierarchical_layout(capacity, num_nodes, local_size);
  load_hierarchical_kernels();
  window = std::make_unique<Window>(comm, layout.window_bytes, WindowOptions{kHierarchicalSignals});
  // The epoch, then the launch count of every block (HierarchicalParams).
  const size_t counters = sizeof(EpochState) + kHierarchicalMaxBlocks * sizeof(uint64_t);
  static_assert(sizeof(EpochState) % sizeof(uint64_t) == 0, "block counters are 8-byte aligned");
  FERRY_CUDA_CHECK(cudaMalloc(&epoch, counters));
  FERRY_CUDA_CHECK(cudaMemset(epoch, 0, counters));
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());

  p = HierarchicalParams{};
  p.window = window->device();
  p.layout = layout;
  p.epoch = epoch;
  p.block_launches = reinterpret_cast<uint64_t*>(epoch + 1);
  p.world_size = topology.size;
  p.num_nodes = num_nodes;
  p.node = topology.node;
  p.local_size = local_size;
  p.local_rank = topology.local_rank;
  for (int q = 0; q < kMaxNodeRanks; ++q) p.local_peers[q] = q < local_size ? topology.ranks_in_node[q] : -1;
  for (int m = 0; m < kMaxNodes; ++m) p.node_peers[m] = -1;
  for (int r = 0; r < topology.size; ++r)
    if (topology.local_rank_of_rank[r] == topology.local_rank) p.node_peers[topology.node_of_rank[r]] = r;
  for (int m = 0; m < num_nodes; ++m)
    FERRY_CHECK(p.node_peers[m] >= 0, Error,
                "AllReduce: node " << m << " has no rank with local index " << topology.local_rank);
}

}  // namespace

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
  state_->shape = comm_shape(max_bytes, comm_.topology());
  // Every algorithm gets its regions, supported on this world size or not.
  size_t total = 0;
  for (size_t a = 0; a < kNumAlgorithms; ++a) {
    const AlgorithmEntry& entry = *algorithms()[a];
    state_->capacity[a] = entry.capacity(max_bytes);
    state_->region_offset[a] = total;
    total += round_up(entry.scratch_bytes(state_->capacity[a], world), 4096);
  }
  if (state_->shape.single_node) {
    state_->scratch = comm_.heap().allocate(total);
    state_->flags = comm_.heap().allocate(kNumAlgorithms * kFlagRegionWords * sizeof(uint64_t));
  } else if (algorithm_supported(AllReduceAlgorithm::kHierarchical, state_->shape)) {
    // Across nodes only the hierarchical algorithm runs: its window, not the
    // NVLink scratch (NOTE [Hierarchical AllReduce setup]).
    setup_hierarchical(comm_, max_bytes, options_, state_->window, state_->hierarchical_epoch,
                       state_->hierarchical, state_->hierarchical_capacity, state_->hierarchical_blocks);
  }
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
  if (state_) state_->window.reset();  // waits for this rank's kernels and transfers
  if (state_ && state_->hierarchical_epoch) cudaFree(state_->hierarchical_epoch);
  if (state_ && state_->epoch) cudaFree(state_->epoch);
  // Symmetric buffers are released with the heap (collective release is not
  // safe in a destructor).
}

bool AllReduce::supports(AllReduceAlgorithm algorithm) const {
  return allreduce::algorithm_supported(algorithm, state_->shape);
}

AllReduceAlgorithm AllReduce::select(size_t bytes) const {
  if (!state_->shape.single_node) return AllReduceAlgorithm::kHierarchical;
  return bytes <= state_->one_shot_max_bytes ? AllReduceAlgorithm::kOneShot : AllReduceAlgorithm::kTwoShot;
}

size_t AllReduce::window_bytes() const { return state_->window ? state_->window->bytes() : 0; }

void AllReduce::run(const void* in, void* out, size_t count, DataType type, ReduceOp op, cudaStream_t stream,
                    AllReduceAlgorithm algorithm) {
  comm_.check();
  const size_t bytes = allreduce::validate_call({in, out, count, type, op, algorithm}, state_->shape);
  if (algorithm == AllReduceAlgorithm::kAuto) algorithm = select(bytes);
  const size_t elem = dtype_size(type);

  if (algorithm == AllReduceAlgorithm::kHierarchical) {
    // validate_call passed: several nodes of equal size, so the window exists.
    FERRY_CHECK(state_->window != nullptr, Error, "AllReduce: the hierarchical algorithm has no window");
    allreduce::HierarchicalParams p = state_->hierarchical;
    const size_t piece_elems = state_->hierarchical_capacity / elem;  // a multiple of 16 bytes
    for (size_t done = 0; done < count; done += piece_elems) {
      p.count = std::min(piece_elems, count - done);
      p.in = static_cast<const char*>(in) + done * elem;
      p.out = static_cast<char*>(out) + done * elem;
      p.aligned = device_aligned(p.in) && device_aligned(p.out);
      allreduce::launch_hierarchical(p, type, op, state_->hierarchical_blocks, stream);
    }
    return;
  }

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
    p.aligned = device_aligned(p.in) && device_aligned(p.out);
    entry.launch(p, type, op, num_sms, stream);
  }
}

}  // namespace ferry
