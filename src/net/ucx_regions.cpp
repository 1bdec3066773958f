// Registered memory and remote keys of the UCX transport: see ucx_regions.hpp.
#include "net/ucx_regions.hpp"

#include <cstring>

#include "ferry/error.hpp"

namespace ferry::net {

namespace {

// Remote keys travel in fixed frames so one all_gather carries every rank's.
constexpr size_t kMaxPackedKey = 2048;

struct KeyFrame {
  uint64_t base;
  uint64_t bytes;
  uint32_t key_bytes;
  uint32_t ok;
  char key[kMaxPackedKey];
};

}  // namespace

int UcxRegions::map(ucp_context_h context, const std::vector<ucp_ep_h>& endpoints, const ucp_mem_map_params_t& map,
                    const char* what, std::mutex& lock, void** allocated) {
  Region region;
  KeyFrame mine{};
  {
    std::lock_guard<std::mutex> guard(lock);
    const ucs_status_t mapped = ucp_mem_map(context, &map, &region.memh);
    void* base = map.address;
    if (mapped == UCS_OK && allocated != nullptr) {
      ucp_mem_attr_t attr{};
      attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
      base = ucp_mem_query(region.memh, &attr) == UCS_OK ? attr.address : nullptr;
      if (base != nullptr) std::memset(base, 0, map.length);
    }
    mine.base = reinterpret_cast<uint64_t>(base);
    mine.bytes = map.length;
    void* packed = nullptr;
    size_t packed_bytes = 0;
    if (mapped == UCS_OK && base != nullptr && ucp_rkey_pack(context, region.memh, &packed, &packed_bytes) == UCS_OK) {
      if (packed_bytes <= kMaxPackedKey) {
        std::memcpy(mine.key, packed, packed_bytes);
        mine.key_bytes = static_cast<uint32_t>(packed_bytes);
        mine.ok = 1;
      }
      ucp_rkey_buffer_release(packed);
    }
  }
  // Every rank learns every rank's outcome, so all fail together.
  std::vector<KeyFrame> all = bootstrap_.all_gather_value(mine);
  for (int r = 0; r < topology_.size; ++r) {
    if (all[r].ok) continue;
    if (region.memh != nullptr) ucp_mem_unmap(context, region.memh);
    FERRY_THROW(Error, "registering " << map.length << " bytes of " << what << " memory with UCX failed on rank "
                                      << r);
  }
  region.base.assign(topology_.size, 0);
  region.bytes.assign(topology_.size, 0);
  region.keys.assign(topology_.size, nullptr);
  region.packed.assign(topology_.size, std::string());
  {
    std::lock_guard<std::mutex> guard(lock);
    for (int r = 0; r < topology_.size; ++r) {
      region.base[r] = all[r].base;
      region.bytes[r] = all[r].bytes;
      if (endpoints[r] == nullptr) continue;
      region.packed[r].assign(all[r].key, all[r].key_bytes);
      const ucs_status_t unpacked = ucp_ep_rkey_unpack(endpoints[r], all[r].key, &region.keys[r]);
      FERRY_CHECK(unpacked == UCS_OK, Error,
                  "UCX call ucp_ep_rkey_unpack failed: " << ucs_status_string(unpacked) << " (rank " << r << ")");
    }
  }
  if (allocated != nullptr) *allocated = reinterpret_cast<void*>(mine.base);
  std::lock_guard<std::mutex> guard(lock);  // the proxy thread looks regions up under it (target)
  regions_.push_back(std::move(region));
  return static_cast<int>(regions_.size()) - 1;
}

void* UcxRegions::peer_pointer(int peer, int region) const {
  if (peer < 0 || peer >= topology_.size || region < 0 || static_cast<size_t>(region) >= regions_.size())
    return nullptr;
  const Region& r = regions_[region];
  if (r.keys[peer] == nullptr) return nullptr;
  void* local = nullptr;
  return ucp_rkey_ptr(r.keys[peer], r.base[peer], &local) == UCS_OK ? local : nullptr;
}

const UcxRegions::Region& UcxRegions::target(int peer, bool reachable, int region, size_t offset,
                                             size_t bytes) const {
  FERRY_CHECK(reachable, InvalidArgument,
              "rank " << peer << " is not reached through the network from rank " << topology_.rank);
  FERRY_CHECK(region >= 0 && static_cast<size_t>(region) < regions_.size(), InvalidArgument,
              "unknown network region " << region);
  const Region& found = regions_[region];
  FERRY_CHECK(offset + bytes <= found.bytes[peer], InvalidArgument,
              "an access of " << bytes << " bytes at offset " << offset << " is past the " << found.bytes[peer]
                              << "-byte region " << region << " of rank " << peer);
  return found;
}

void UcxRegions::deregister(ucp_context_h context, int id) {
  Region& region = regions_.at(static_cast<size_t>(id));
  drop_keys(region);
  if (region.memh != nullptr) ucp_mem_unmap(context, region.memh);
  region.memh = nullptr;
}

void UcxRegions::drop_all_keys() noexcept {
  for (Region& region : regions_) drop_keys(region);
}

void UcxRegions::unmap_all(ucp_context_h context) noexcept {
  for (Region& region : regions_)
    if (region.memh != nullptr) ucp_mem_unmap(context, region.memh);
  regions_.clear();
}

void UcxRegions::drop_keys(Region& region) noexcept {
  for (ucp_rkey_h& key : region.keys) {
    if (key != nullptr) ucp_rkey_destroy(key);
    key = nullptr;
  }
}

}  // namespace ferry::net
