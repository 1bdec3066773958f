// AllReduce: inside a node over NVLink peer-to-peer memory; across nodes
// hierarchically (NVLink inside each node, the CPU proxy and UCX between nodes).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/symmetric_heap.hpp"
#include "ferry/types.hpp"

namespace ferry {

class Communicator;

enum class AllReduceAlgorithm : int {
  kAuto = 0,
  kOneShot = 1,            // every rank pushes its data to all, each reduces it all
  kTwoShot = 2,            // reduce-scatter (push) + all-gather (pull)
  kRing = 3,               // ring reduce-scatter + ring all-gather
  kRecursiveDoubling = 4,  // log2(n) pairwise exchanges; power-of-two sizes only
  kHierarchical = 5,       // ranks in several nodes (the same number in each): reduce-scatter in the
                           // node, allreduce of the shard across nodes, all-gather in the node
};
// one_shot, two_shot, ring and recursive_doubling need every rank in one node
// (NVLink); hierarchical needs ranks in several nodes; auto picks among those
// that can run (select()).

const char* algorithm_name(AllReduceAlgorithm algorithm);
AllReduceAlgorithm algorithm_from_string(const std::string& name);

struct AllReduceOptions {
  // Blocks per kernel; 0 = chosen per algorithm and size.
  int max_blocks = 0;
};

// NOTE [AllReduce buffers and CUDA graphs]
// The input and output may be any device pointers (no registration needed): the
// kernels copy the input into the AllReduce's own symmetric scratch buffers as
// part of the first exchange and write the output locally. A captured graph holds
// the pointers it was captured with; capturing again with other pointers gives
// another graph, and both replay correctly. Operations on one AllReduce must be
// ordered on the device (one stream, or streams joined by events), as they share
// scratch memory; each call advances a device-side epoch, so graphs need no host
// bookkeeping between replays.
class AllReduce {
 public:
  // Collective. `max_bytes`: the largest buffer (count * dtype size) any call
  // will reduce. Inside one node: allocates about 2 * max_bytes of symmetric
  // scratch per rank, plus fixed regions of at most ~150 MB for the latency
  // algorithms. Across nodes: allocates only the hierarchical algorithm's
  // window (window_bytes(), at most ~64 MiB unless max_bytes is tiny, plus as
  // much pinned host memory where remote puts are staged); bigger calls run as
  // several launches. The scratch belongs to the communicator's symmetric heap
  // and is freed with the Communicator (destructors cannot run collectives), so
  // create AllReduce objects once, not per call.
  AllReduce(Communicator& comm, size_t max_bytes, AllReduceOptions options = {});
  ~AllReduce();
  AllReduce(const AllReduce&) = delete;
  AllReduce& operator=(const AllReduce&) = delete;

  // out[i] = op over ranks of in[i], for i < count; `in == out` is allowed.
  // Asynchronous on `stream`; every rank gets bitwise identical results.
  void run(const void* in, void* out, size_t count, DataType type, ReduceOp op,
           cudaStream_t stream, AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto);

  // The algorithm kAuto uses for this many bytes on this communicator
  // (hierarchical whenever the ranks span nodes).
  AllReduceAlgorithm select(size_t bytes) const;
  // Whether `algorithm` can run on this communicator (recursive doubling needs a
  // power-of-two size; one_shot, two_shot, ring and recursive_doubling need all
  // ranks in one node; hierarchical needs several nodes of the same size).
  bool supports(AllReduceAlgorithm algorithm) const;
  size_t max_bytes() const { return max_bytes_; }
  // Bytes of the window the hierarchical algorithm works in, per rank; 0 when
  // there is none (all ranks in one node).
  size_t window_bytes() const;

 private:
  struct State;
  Communicator& comm_;
  size_t max_bytes_;
  AllReduceOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace ferry
