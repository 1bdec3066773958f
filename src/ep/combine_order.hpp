// The one-role combine's claim order (NOTE [EP combine one role], combine.cu): host and device, so that the
// unit tests walk the same code as the kernel.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define FERRY_EP_HOST_DEVICE __host__ __device__
#else
#define FERRY_EP_HOST_DEVICE
#endif

namespace ferry::ep {

constexpr int kMaxOrderRanks = 8;  // = kMaxRanks (ep_params.hpp, static_assert in combine.cu)

// Tickets [start[i], start[i + 1]) are the items of source source[i]: the peers from rank + 1 on, this rank
// (its own tokens) next; inside a source, slot-major, then chunk. Then one ticket per (token, chunk) of this
// rank's num_tokens, token-major (decode: s = kHomeSweep): the sums of the tokens with no row here (the others
// are own items and are skipped there).
constexpr int kHomeSweep = -1;

struct OneRoleOrder {
  int start[kMaxOrderRanks + 1];
  int source[kMaxOrderRanks];
  int sweep_end;  // start[world_size] + num_tokens * num_chunks

  FERRY_EP_HOST_DEVICE void build(int rank, int world_size, const int32_t* token_count, int num_chunks,
                                  int num_tokens) {
    int run = 0;
    for (int i = 0; i < world_size; ++i) {
      const int s = (rank + 1 + i) % world_size;
      source[i] = s;
      start[i] = run;
      run += token_count[s] * num_chunks;
    }
    start[world_size] = run;
    sweep_end = run + num_tokens * num_chunks;
  }
  FERRY_EP_HOST_DEVICE int total() const { return sweep_end; }
  // Ticket (< total()) to its item: (source s, slot, chunk), or (kHomeSweep, token, chunk).
  FERRY_EP_HOST_DEVICE void decode(int ticket, int world_size, int num_chunks, int& s, int& slot, int& chunk) const {
    if (ticket >= start[world_size]) {
      const int local = ticket - start[world_size];
      s = kHomeSweep;
      slot = local / num_chunks;
      chunk = local % num_chunks;
      return;
    }
    int i = 0;
    while (ticket >= start[i + 1]) ++i;
    const int local = ticket - start[i];
    s = source[i];
    slot = local / num_chunks;
    chunk = local % num_chunks;
  }
};

}  // namespace ferry::ep

#undef FERRY_EP_HOST_DEVICE
