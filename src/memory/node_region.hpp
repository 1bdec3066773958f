// Host side of the channel layer's node part: a symmetric buffer's region as the
// peers of the node map it, as the kernels take it (NodeRegion, include/ferry/device/channel.cuh).
#pragma once

#include <cstddef>
#include <vector>

#include "ferry/device/channel.cuh"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"

namespace ferry {

// Entry i is the address, as mapped here, of `byte_offset` into the buffer of
// global rank ranks[i] (ranks: the kernel's group, e.g. Topology::ranks_in_node).
template <typename T>
device::NodeRegion<T> node_region(const SymmetricBuffer& buffer, const std::vector<int>& ranks, size_t byte_offset = 0) {
  FERRY_CHECK(ranks.size() <= static_cast<size_t>(device::kMaxNodeRanks), NotSupported,
              "a node of " << ranks.size() << " ranks; a node region holds at most " << device::kMaxNodeRanks);
  device::NodeRegion<T> region{};
  for (size_t i = 0; i < ranks.size(); ++i) {
    char* base = static_cast<char*>(buffer.peer(ranks[i]));
    FERRY_CHECK(base != nullptr, NotSupported, "rank " << ranks[i] << " is not mapped over NVLink here");
    region.set(static_cast<int>(i), reinterpret_cast<T*>(base + byte_offset));
  }
  return region;
}

}  // namespace ferry
