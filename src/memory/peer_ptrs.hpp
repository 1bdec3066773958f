// Host side of the NVLink channel: the peer table of a symmetric buffer, as the
// kernels of the node take it (include/ferry/device/nvlink.cuh).
#pragma once

#include <cstddef>
#include <vector>

#include "ferry/device/nvlink.cuh"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"

namespace ferry {

// Entry i is the address, as mapped here, of `byte_offset` into the buffer of
// global rank ranks[i] (ranks: the kernel's group, e.g. Topology::ranks_in_node).
template <typename T>
device::PeerPtrs<T> peer_ptrs(const SymmetricBuffer& buffer, const std::vector<int>& ranks, size_t byte_offset = 0) {
  FERRY_CHECK(ranks.size() <= static_cast<size_t>(device::kMaxNodeRanks), NotSupported,
              "a node of " << ranks.size() << " ranks; the NVLink channel holds at most " << device::kMaxNodeRanks);
  device::PeerPtrs<T> table{};
  for (size_t i = 0; i < ranks.size(); ++i) {
    char* base = static_cast<char*>(buffer.peer(ranks[i]));
    FERRY_CHECK(base != nullptr, NotSupported, "rank " << ranks[i] << " is not mapped over NVLink here");
    table.ptr[i] = reinterpret_cast<T*>(base + byte_offset);
  }
  return table;
}

}  // namespace ferry
