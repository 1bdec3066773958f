// Argument checks at the AllReduce API boundary (host only, no device work), kept
// separate so CPU tests can exercise every rejection without a GPU.
#pragma once

#include <cstddef>

#include "ferry/allreduce.hpp"
#include "ferry/topology.hpp"
#include "ferry/types.hpp"

namespace ferry::allreduce {

struct CallShape {
  const void* in;
  const void* out;
  size_t count;
  DataType type;
  ReduceOp op;
  AllReduceAlgorithm algorithm;
};

struct CommShape {
  size_t max_bytes;     // capacity of the AllReduce
  int world_size;
  bool single_node;     // all ranks share a node (NVLink)
  int num_nodes = 1;       // nodes the ranks span
  int ranks_per_node = 0;  // ranks in each node when every node holds as many; 0 when they differ
};

// The shape of a communicator with this topology.
CommShape comm_shape(size_t max_bytes, const Topology& topology);

// Throws InvalidArgument (or NotSupported for an algorithm the communicator can't
// run) with a message that names the values. Returns the byte size of the call.
size_t validate_call(const CallShape& call, const CommShape& comm);

// Whether `algorithm` can run on a communicator of this shape.
bool algorithm_supported(AllReduceAlgorithm algorithm, const CommShape& comm);

}  // namespace ferry::allreduce
