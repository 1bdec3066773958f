// Symmetric heap: buffers every rank of a group allocates (or registers) in the
// same order with the same size, mapped into every peer of the same node through
// CUDA IPC so kernels can load and store straight into peer memory over NVLink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ferry/bootstrap.hpp"
#include "ferry/topology.hpp"

namespace ferry {

struct SymmetricBuffer {
  void* local = nullptr;          // this rank's memory
  size_t bytes = 0;
  // Address of every rank's buffer as mapped in this process, indexed by global
  // rank; nullptr for ranks in other nodes. peers[rank()] == local.
  std::vector<void*> peers;
  int id = -1;  // order of creation in the heap (same on every rank)
  void* peer(int rank) const { return peers[static_cast<size_t>(rank)]; }
};

class SymmetricHeap {
 public:
  SymmetricHeap(Bootstrap& bootstrap, const Topology& topology, int device);
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  // Collective: every rank calls with the same bytes, in the same order.
  // The memory is zeroed. Throws MismatchError naming the ranks that disagree.
  SymmetricBuffer allocate(size_t bytes);

  // Collective: makes an existing device allocation (or a sub-range of one, e.g. a
  // PyTorch tensor) visible to the node's peers. The caller keeps ownership and
  // must keep the memory alive while peers may use it.
  SymmetricBuffer register_buffer(void* ptr, size_t bytes);

  // Collective: frees (allocate) or unmaps (register_buffer) a buffer everywhere.
  void release(const SymmetricBuffer& buffer);

  size_t num_buffers() const { return buffers_.size(); }

 private:
  struct PeerMapping;
  enum class Kind : int32_t { kAllocate = 1, kRegister = 2, kRelease = 3 };
  SymmetricBuffer exchange(void* local, size_t bytes, bool owned);
  void rendezvous(Kind kind, size_t bytes, int32_t release_id);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  int device_;
  int next_id_ = 0;
  struct Entry {
    SymmetricBuffer buffer;
    bool owned = false;
    std::vector<std::pair<int, uint64_t>> mapping_keys;  // peer mappings this buffer uses
  };
  std::map<int, Entry> buffers_;
  // One mapping per peer allocation, keyed by (peer rank, peer's base address):
  // cudaIpcOpenMemHandle may be called once per allocation per process, so
  // sub-ranges of the same allocation share it (reference counted).
  std::map<std::pair<int, uint64_t>, std::unique_ptr<PeerMapping>> mappings_;
};

}  // namespace ferry
