// The memory a UCX transport registered, every rank's part of it, and this rank's remote keys to the peers' parts
// (ucx_regions.cpp). Used by ucx_transport.cpp only (it includes UCX's header).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/topology.hpp"

namespace ferry::net {

class UcxRegions {
 public:
  struct Region {
    ucp_mem_h memh = nullptr;
    std::vector<uint64_t> base;    // by rank
    std::vector<uint64_t> bytes;   // by rank
    std::vector<ucp_rkey_h> keys;  // by rank; nullptr for peers in the node
    std::vector<std::string> packed;  // by rank: the packed keys, for other workers' endpoints (send lanes)
  };

  UcxRegions(Bootstrap& bootstrap, const Topology& topology) : bootstrap_(bootstrap), topology_(topology) {}

  // Collective: ucp_mem_map(map) on `context` and the exchange of every rank's base, size and packed key (all
  // ranks fail together, naming what was registered); keys unpacked on `endpoints` (by rank, nullptr in the node).
  // allocated: where UCX allocated the memory (UCP_MEM_MAP_ALLOCATE), its local address, zeroed. `lock` guards the
  // UCX calls against the proxy thread and is released while waiting for peers. Returns the region id.
  int map(ucp_context_h context, const std::vector<ucp_ep_h>& endpoints, const ucp_mem_map_params_t& map,
          const char* what, std::mutex& lock, void** allocated);
  const Region& region(int id) const { return regions_.at(static_cast<size_t>(id)); }
  // This process's pointer to `peer`'s part of `region` (ucp_rkey_ptr), or nullptr.
  void* peer_pointer(int peer, int region) const;
  // Region `region`, checked: `peer` reached (reachable), the region known, the access inside the peer's part.
  const Region& target(int peer, bool reachable, int region, size_t offset, size_t bytes) const;
  // Local: region `id`'s keys and registration.
  void deregister(ucp_context_h context, int id);
  // Teardown, in the order UCX needs: the keys (before their endpoints close), then the registrations.
  void drop_all_keys() noexcept;
  void unmap_all(ucp_context_h context) noexcept;

 private:
  static void drop_keys(Region& region) noexcept;

  Bootstrap& bootstrap_;
  const Topology& topology_;
  std::vector<Region> regions_;
};

}  // namespace ferry::net
