// How the rank-rows dispatch's send grid shares out this rank's own rows (NOTE [EP rank rows by role],
// NOTE [EP own rows first]): rules chosen per call from the grid and the knobs, kept here so they are tested
// on the CPU (tests/unit/test_ep_send_roles.cpp).
#pragma once

#include <cstdint>
#include <optional>

namespace ferry::ep {

// The send blocks that write only this rank's own rows, or 0 (every block writes every destination).
// `quantizes`: bf16 tokens sent as fp8. `chosen`: FERRY_EP_RANK_ROWS_LOCAL_BLOCKS where set.
int rank_rows_local_blocks(int send_blocks, int world_size, bool quantizes, std::optional<int64_t> chosen);

// The copy engine's share of the own rows, in percent. `chosen`: FERRY_EP_OWN_ROWS_COPY_PERCENT where set.
int own_rows_copy_percent(int send_blocks, std::optional<int64_t> chosen);

}  // namespace ferry::ep
