// Symmetric heap: collective allocation / registration, CUDA IPC handle exchange
// through the bootstrap, peer pointers for every rank of the node.
#include "ferry/symmetric_heap.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <sstream>

#include "common/driver_api.hpp"
#include "ferry/topology.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"

namespace ferry {

struct SymmetricHeap::PeerMapping {
  void* base = nullptr;  // peer allocation mapped into this process
  int references = 0;
};

namespace {

// What each rank tells the others about one buffer.
struct BufferInfo {
  cudaIpcMemHandle_t handle;
  uint64_t base_address;  // in the owner's address space: identifies the allocation
  uint64_t offset;        // of the buffer inside that allocation
};

struct RendezvousRecord {
  int32_t kind;
  int32_t id;
  uint64_t bytes;
};

const char* kind_name(int32_t kind) {
  switch (kind) {
    case 1: return "allocate";
    case 2: return "register_buffer";
    case 3: return "release";
    default: return "?";
  }
}

}  // namespace

SymmetricHeap::SymmetricHeap(Bootstrap& bootstrap, const Topology& topology, int device)
    : bootstrap_(bootstrap), topology_(topology), device_(device) {}

SymmetricHeap::~SymmetricHeap() {
  // Not collective: peers may still hold mappings of our memory, which CUDA keeps
  // alive until they unmap. Errors are ignored: destructors must not throw.
  for (auto& [key, mapping] : mappings_) cudaIpcCloseMemHandle(mapping->base);
  for (auto& [id, entry] : buffers_)
    if (entry.owned) cudaFree(entry.buffer.local);
}

// NOTE [Symmetric rendezvous]
// Every collective heap call first gathers (kind, id, bytes) from all ranks and
// compares them, before any CUDA work, so a rank that allocates a different size
// or calls in a different order gets a MismatchError naming every rank's call on
// every rank, instead of a mapping of the wrong size and a crash later.
void SymmetricHeap::rendezvous(Kind kind, size_t bytes, int32_t id) {
  RendezvousRecord mine{static_cast<int32_t>(kind), id, bytes};
  std::vector<RendezvousRecord> all = bootstrap_.all_gather_value(mine);
  bool agree = true;
  for (const auto& r : all)
    agree = agree && r.kind == all[0].kind && r.id == all[0].id && r.bytes == all[0].bytes;
  if (agree) return;
  std::ostringstream os;
  os << "symmetric heap: ranks disagree on a collective call:";
  for (size_t r = 0; r < all.size(); ++r)
    os << " rank " << r << ": " << kind_name(all[r].kind) << " #" << all[r].id << " of " << all[r].bytes
       << " bytes;";
  FERRY_THROW(MismatchError, os.str());
}

SymmetricBuffer SymmetricHeap::allocate(size_t bytes) {
  FERRY_ARG_CHECK(bytes > 0, "SymmetricHeap::allocate: bytes must be > 0");
  rendezvous(Kind::kAllocate, bytes, next_id_);
  void* ptr = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  cudaError_t err = cudaMemset(ptr, 0, bytes);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    cudaFree(ptr);
    FERRY_CUDA_CHECK(err);
  }
  try {
    return exchange(ptr, bytes, true);
  } catch (...) {
    cudaFree(ptr);
    throw;
  }
}

SymmetricBuffer SymmetricHeap::register_buffer(void* ptr, size_t bytes) {
  FERRY_ARG_CHECK(ptr != nullptr, "SymmetricHeap::register_buffer: ptr is null");
  FERRY_ARG_CHECK(bytes > 0, "SymmetricHeap::register_buffer: bytes must be > 0");
  rendezvous(Kind::kRegister, bytes, next_id_);
  return exchange(ptr, bytes, false);
}

SymmetricBuffer SymmetricHeap::exchange(void* local, size_t bytes, bool owned) {
  BufferInfo mine{};
  CUdeviceptr base = 0;
  size_t base_size = 0;
  FERRY_CU_CHECK(driver::mem_get_address_range(&base, &base_size, reinterpret_cast<CUdeviceptr>(local)));
  const uint64_t offset = reinterpret_cast<uint64_t>(local) - static_cast<uint64_t>(base);
  FERRY_CHECK(offset + bytes <= base_size, InvalidArgument,
              "register_buffer: range [" << local << ", +" << bytes << ") runs past the end of its allocation ("
                                         << base_size << " bytes at offset " << offset << ")");
  if (topology_.local_size > 1) {
    cudaError_t err = cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(base));
    if (err != cudaSuccess) {
      cudaGetLastError();
      FERRY_THROW(CudaError, "cannot export " << local << " to peers with cudaIpcGetMemHandle ("
                                              << cudaGetErrorString(err)
                                              << "); the buffer must come from cudaMalloc");
    }
  }
  mine.base_address = static_cast<uint64_t>(base);
  mine.offset = offset;
  std::vector<BufferInfo> all = bootstrap_.all_gather_value(mine);

  Entry entry;
  entry.owned = owned;
  entry.buffer.local = local;
  entry.buffer.bytes = bytes;
  entry.buffer.id = next_id_;
  entry.buffer.peers.assign(topology_.size, nullptr);
  entry.buffer.peers[topology_.rank] = local;
  try {
    for (int peer : topology_.ranks_in_node) {
      if (peer == topology_.rank) continue;
      const auto key = std::make_pair(peer, all[peer].base_address);
      auto it = mappings_.find(key);
      if (it == mappings_.end()) {
        auto mapping = std::make_unique<PeerMapping>();
        cudaError_t err =
            cudaIpcOpenMemHandle(&mapping->base, all[peer].handle, cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
          cudaGetLastError();
          FERRY_THROW(CudaError, "rank " << topology_.rank << " cannot map the memory of local peer rank "
                                         << peer << " (cudaIpcOpenMemHandle: " << cudaGetErrorString(err)
                                         << "); are both GPUs peer-to-peer reachable?");
        }
        it = mappings_.emplace(key, std::move(mapping)).first;
      }
      it->second->references++;
      entry.mapping_keys.push_back(key);
      entry.buffer.peers[peer] = static_cast<char*>(it->second->base) + all[peer].offset;
    }
  } catch (...) {
    for (const auto& key : entry.mapping_keys) {
      auto it = mappings_.find(key);
      if (--it->second->references == 0) {
        cudaIpcCloseMemHandle(it->second->base);
        mappings_.erase(it);
      }
    }
    throw;
  }
  SymmetricBuffer result = entry.buffer;
  buffers_.emplace(next_id_++, std::move(entry));
  return result;
}

void SymmetricHeap::release(const SymmetricBuffer& buffer) {
  auto it = buffers_.find(buffer.id);
  FERRY_ARG_CHECK(it != buffers_.end(), "SymmetricHeap::release: unknown buffer id " << buffer.id);
  rendezvous(Kind::kRelease, it->second.buffer.bytes, buffer.id);
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
  for (const auto& key : it->second.mapping_keys) {
    auto m = mappings_.find(key);
    if (--m->second->references == 0) {
      cudaIpcCloseMemHandle(m->second->base);
      mappings_.erase(m);
    }
  }
  // Peers unmap before the owner frees.
  bootstrap_.barrier();
  if (it->second.owned) FERRY_CUDA_CHECK(cudaFree(it->second.buffer.local));
  buffers_.erase(it);
}

}  // namespace ferry
