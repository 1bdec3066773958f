// The one table of EP paths: where the data goes (inside one node over NVLink,
// directly across nodes, hierarchically across nodes) x the output contract
// (EpLayout). An EpBuffer chooses its entry once, when it is built; its four
// halves then launch through the entry, with no further branching on the path.
#pragma once

#include <cuda_runtime.h>

#include "ep/ep_params.hpp"
#include "ferry/ep.hpp"

namespace ferry::ep {

struct EpPath {
  const char* name;   // for messages and ferry-bench
  bool fuses_layout;  // the send kernel computes a one-block layout itself (NOTE [EP fused layout])
  bool overlaps;      // dispatch() and combine() may run the halves at once (NOTE [Overlapped halves and free SMs])
  int dispatch_recv_blocks;  // of num_sms, for dispatch()'s receive half; 0: the buffer's split
  bool dispatch_one_grid;    // dispatch() without quantizing: the send grid does the receive half's work too
                             // (NOTE [EP rank rows one grid])
  bool combine_one_role;     // combine() in high throughput: NOTE [EP combine one role] (combine.cu)
  void (*dispatch_send)(const EpBuffer::State& st, const Params& p, cudaStream_t stream);
  void (*dispatch_recv)(const EpBuffer::State& st, const Params& p, cudaStream_t stream);
  void (*combine_send)(const EpBuffer::State& st, const Params& p, cudaStream_t stream);
  void (*combine_recv)(const EpBuffer::State& st, const Params& p, cudaStream_t stream);
};

// The entry for a buffer whose ranks span nodes or not, hierarchical or not
// (decided by EpBuffer from the topology), and its layout. Throws NotSupported
// for a combination no path takes (rank rows across nodes), naming the way out.
const EpPath& choose_path(bool spans_nodes, bool hierarchical, EpLayout layout, int world_size, int num_nodes);

}  // namespace ferry::ep
