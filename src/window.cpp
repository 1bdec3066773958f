// Window: the host side of the device API. Builds, for every peer, the NVLink
// channel (CUDA IPC mapping of the peer's window and signals) or the proxy
// channel (UCX registrations of where the peer's puts and signals land).
#include "ferry/window.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "common/knobs.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"
#include "net/proxy.hpp"

namespace ferry {

struct Window::State {
  SymmetricBuffer data;          // the device window, mapped into the node's peers
  SymmetricBuffer nvl_signals;   // [world][num_signals], mapped into the node's peers
  char** nvl_peer = nullptr;     // device tables
  uint64_t** nvl_peer_signals = nullptr;
  char** map_peer = nullptr;     // device table (NOTE [Mapped peers]); nullptr when no peer is mapped
  std::vector<char*> map_peer_host;  // the same table on the host (Window::maps_peer)
  uint64_t** map_peer_signals = nullptr;  // device table (NOTE [Mapped signals]); nullptr when none is mapped
  std::vector<char*> map_peer_signals_host;  // the same table on the host (Window::maps_peer_signals)
  std::vector<void*> mapped;     // peers' landing buffers and signal words mapped here and registered with CUDA
  bool landing_from_transport = false;  // UCX allocated `landing` (it frees it)
  bool landing_registered_here = false;  // ... and this window registered it with CUDA (unregisters it)
  char* landing = nullptr;       // staged: pinned host memory remote puts land in
  char* send_mirror = nullptr;   // staged: pinned host memory kernels copy put sources into
  uint64_t* net_signals = nullptr;  // pinned host memory remote signals land in
  bool signals_from_transport = false;  // UCX allocated `net_signals` (it frees it)
  bool signals_registered_here = false;  // ... and this window registered them with CUDA
  uint32_t window_id = 0;
  bool registered = false;
};

namespace {
template <typename T>
T* host_mapped(size_t bytes) {
  void* p = nullptr;
  FERRY_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(p, 0, bytes);
  return static_cast<T*>(p);
}
template <typename T>
T* device_pointer(T* host) {
  void* d = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&d, host, 0));
  return static_cast<T*>(d);
}

// Makes a buffer UCX allocated (a landing buffer, signal words) readable by this GPU. Returns whether
// this call registered it (then the window unregisters it). UCX may have pinned
// it already: with its cuda_copy transport loaded (UCX_TLS unset), ucp_mem_map
// also registers host memory with CUDA, and cudaHostRegister then answers
// "already registered" (seen on 2x2 virtual nodes). That registration serves as
// well, if the GPU can address the whole range; UCX drops it when it frees the memory.
bool register_transport_memory(char* memory, size_t bytes) {
  const cudaError_t registered =
      cudaHostRegister(memory, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (registered == cudaSuccess) return true;
  cudaGetLastError();
  bool usable = false;
  if (registered == cudaErrorHostMemoryAlreadyRegistered) {
    cudaPointerAttributes first{}, last{};
    usable = cudaPointerGetAttributes(&first, memory) == cudaSuccess &&
             cudaPointerGetAttributes(&last, memory + bytes - 1) == cudaSuccess &&
             first.type == cudaMemoryTypeHost && last.type == cudaMemoryTypeHost && first.devicePointer != nullptr &&
             static_cast<char*>(last.devicePointer) == static_cast<char*>(first.devicePointer) + (bytes - 1);
    cudaGetLastError();
  }
  FERRY_CHECK(usable, NotSupported,
              "Window: CUDA cannot register the host memory UCX allocated for the window ("
                  << cudaGetErrorString(registered) << "); FERRY_UCX_SHM_DIRECT=0 (on every rank) stages "
                  << "through cudaHostAlloc'd memory instead");
  return false;
}

// NOTE [Mapped peers] (channel.cuh): every peer of another node whose part of
// `region` UCX maps here (ucp_rkey_ptr: its shared-memory transports) and CUDA
// registers gets its device pointer in the returned table (appended to
// `registered`); any other peer (tcp, RDMA, a refused registration) keeps
// nullptr, so the proxy. Local: each rank decides for its own puts.
std::vector<char*> map_peer_regions(const Topology& topology, net::Transport& transport, int world, size_t bytes,
                                     int region, std::vector<void*>& registered) {
  std::vector<char*> table(world, nullptr);
  for (int r = 0; r < world; ++r) {
    if (topology.same_node(r)) continue;
    void* peer = transport.peer_pointer(r, region);
    if (peer == nullptr) continue;
    if (cudaHostRegister(peer, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable) != cudaSuccess) {
      cudaGetLastError();  // not registrable here: this peer keeps the proxy
      continue;
    }
    registered.push_back(peer);
    table[r] = device_pointer(static_cast<char*>(peer));
  }
  return table;
}
// The device copy of a per-peer table of device pointers (nullptr if every entry is).
template <typename T>
T** device_table(const std::vector<char*>& host) {
  bool any = false;
  for (char* entry : host) any |= entry != nullptr;
  if (!any) return nullptr;
  T** table = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&table, host.size() * sizeof(T*)));
  FERRY_CUDA_CHECK(cudaMemcpy(table, host.data(), host.size() * sizeof(T*), cudaMemcpyHostToDevice));
  return table;
}
}  // namespace

Window::Window(Communicator& comm, size_t bytes, WindowOptions options) : comm_(comm), state_(std::make_unique<State>()) {
  FERRY_ARG_CHECK(bytes > 0, "Window: bytes must be > 0");
  FERRY_ARG_CHECK(options.num_signals > 0, "Window: num_signals must be > 0, got " << options.num_signals);
  comm_.check();
  const int world = comm_.size();
  const size_t signal_bytes = static_cast<size_t>(world) * options.num_signals * sizeof(uint64_t);
  State& s = *state_;
  s.data = comm_.heap().allocate(bytes);
  s.nvl_signals = comm_.heap().allocate(signal_bytes);

  std::vector<char*> peers(world, nullptr);
  std::vector<uint64_t*> peer_signals(world, nullptr);
  for (int r = 0; r < world; ++r) {
    if (!comm_.topology().same_node(r)) continue;
    peers[r] = static_cast<char*>(s.data.peer(r));
    peer_signals[r] = static_cast<uint64_t*>(s.nvl_signals.peer(r));
  }
  FERRY_CUDA_CHECK(cudaMalloc(&s.nvl_peer, world * sizeof(char*)));
  FERRY_CUDA_CHECK(cudaMalloc(&s.nvl_peer_signals, world * sizeof(uint64_t*)));
  FERRY_CUDA_CHECK(cudaMemcpy(s.nvl_peer, peers.data(), world * sizeof(char*), cudaMemcpyHostToDevice));
  FERRY_CUDA_CHECK(
      cudaMemcpy(s.nvl_peer_signals, peer_signals.data(), world * sizeof(uint64_t*), cudaMemcpyHostToDevice));

  DeviceWindow& d = device_;
  d.local = static_cast<char*>(s.data.local);
  d.nvl_signals = static_cast<uint64_t*>(s.nvl_signals.local);
  d.nvl_peer = s.nvl_peer;
  d.nvl_peer_signals = s.nvl_peer_signals;
  d.bytes = bytes;
  d.num_signals = options.num_signals;
  d.rank = comm_.rank();
  d.world_size = world;
  d.wait = WaitContext{comm_.device_error_state(), comm_.device_abort_flag(), comm_.timeout_ns(), comm_.rank()};

  if (net::Proxy* proxy = comm_.proxy()) {
    // NOTE [Window staging]
    // Peers of other nodes reach this window through UCX. Where UCX moves CUDA
    // memory (RDMA with GPUDirect) the device window itself is registered:
    // their puts land in it and the transport reads put sources from it.
    // Elsewhere (tcp, shared memory) UCX moves CUDA memory slowly and cannot do
    // atomics on it, so both directions go through pinned host memory mapped
    // into the GPU, and the proxy thread never calls CUDA on the data path:
    //  - puts land in `landing` (DeviceWindow::net_recv), which kernels read
    //    through recv_ptr();
    //  - the group that issues a put first copies its source range into the
    //    same offsets of `send_mirror` (DeviceWindow::net_send, put_group in
    //    channel.cuh), and the proxy puts from there.
    // Why no CUDA call in the proxy: a kernel may be waiting for the proxy while
    // another thread of the process is inside a CUDA call that waits for that
    // kernel (a blocking copy into pageable memory, a lazy module load) and
    // holds a driver lock the proxy's own cudaMemcpyAsync would need. The
    // earlier design staged sources with cudaMemcpyAsync in the proxy thread
    // and deadlocked that way under a torch CUDA graph replay followed by
    // .cpu() (tests/python/test_gpu_ep.py::test_low_latency_cuda_graph).
    // The mirror keeps put sources at their window offsets, so the protocols'
    // reuse rules for a put's source (it stays untouched until the put is
    // complete at the target) cover the mirror as they cover the window.
    // Network signals always land in pinned host memory the GPU polls (8-byte
    // puts of the word's total, NOTE [Network signals]). Kernels read through
    // recv_ptr() and wait_signal() and never see which case applies.
    net::Transport& transport = proxy->transport();
    gpu_direct_ = transport.moves_cuda_memory();
    // NOTE [Mapped peers], [Mapped signals] (channel.cuh): over UCX shared memory the
    // landing buffer and the signal words come from UCX, so that peers on this
    // host can map them; registered with CUDA for this GPU's reads.
    const bool shm_direct = !gpu_direct_ && knobs::kUcxShmDirect.value();
    net::ProxyWindow pw;
    pw.bytes = bytes;
    pw.num_signals = static_cast<uint32_t>(options.num_signals);
    if (shm_direct) {
      void* signals = nullptr;
      pw.signal_region = transport.allocate_region(signal_bytes, &signals, proxy->lock());
      s.net_signals = static_cast<uint64_t*>(signals);
      std::memset(s.net_signals, 0, signal_bytes);
      s.signals_from_transport = true;
      s.signals_registered_here = register_transport_memory(reinterpret_cast<char*>(s.net_signals), signal_bytes);
      s.map_peer_signals_host =
          map_peer_regions(comm_.topology(), transport, world, signal_bytes, pw.signal_region, s.mapped);
      s.map_peer_signals = device_table<uint64_t>(s.map_peer_signals_host);
      d.map_peer_signals = s.map_peer_signals;
    } else {
      s.net_signals = host_mapped<uint64_t>(signal_bytes);
      pw.signal_region = transport.register_region(s.net_signals, signal_bytes, false, proxy->lock());
    }
    if (gpu_direct_) {
      pw.local = d.local;
      pw.local_is_cuda = true;
      pw.data_region = transport.register_region(d.local, bytes, true, proxy->lock());
      d.net_recv = d.local;
      d.net_send = nullptr;
    } else {
      s.send_mirror = host_mapped<char>(bytes);
      pw.local = s.send_mirror;
      pw.local_is_cuda = false;
      if (shm_direct) {
        void* landing = nullptr;
        pw.data_region = transport.allocate_region(bytes, &landing, proxy->lock());
        s.landing = static_cast<char*>(landing);
        s.landing_from_transport = true;
        s.landing_registered_here = register_transport_memory(s.landing, bytes);
        s.map_peer_host = map_peer_regions(comm_.topology(), transport, world, bytes, pw.data_region, s.mapped);
        s.map_peer = device_table<char>(s.map_peer_host);
        d.map_peer = s.map_peer;
      } else {
        s.landing = host_mapped<char>(bytes);
        pw.data_region = transport.register_region(s.landing, bytes, false, proxy->lock());
      }
      d.net_recv = device_pointer(s.landing);
      d.net_send = device_pointer(s.send_mirror);
    }
    d.net_signals = device_pointer(s.net_signals);
    s.window_id = proxy->add_window(pw);
    s.registered = true;
    proxy->warm_up_window(s.window_id, comm_.bootstrap());  // NOTE [Proxy warm-up] (src/net/proxy.hpp)
    d.window_id = s.window_id;
    d.fifo = proxy->fifo();
  }
  FERRY_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {
// Whether a per-peer table of mapped regions (map_peer_regions; empty: none mapped) has `peer`'s.
bool table_maps(const std::vector<char*>& table, int peer, int world, const char* where) {
  FERRY_ARG_CHECK(peer >= 0 && peer < world, where << ": no rank " << peer);
  return !table.empty() && table[peer] != nullptr;
}
}  // namespace

bool Window::maps_peer(int peer) const {
  return table_maps(state_->map_peer_host, peer, device_.world_size, "Window::maps_peer");
}

bool Window::maps_peer_signals(int peer) const {
  return table_maps(state_->map_peer_signals_host, peer, device_.world_size, "Window::maps_peer_signals");
}

Window::~Window() {
  State& s = *state_;
  cudaDeviceSynchronize();  // no kernel still pushes descriptors for this window
  net::Proxy* proxy = comm_.proxy();
  if (proxy != nullptr && s.registered) {
    try {
      proxy->drain();  // this rank's puts are complete at their targets
    } catch (const Error&) {
      // A peer that never completes: the memory below stays with the proxy.
    }
    proxy->remove_window(s.window_id);
    // CUDA lets go of the mapped memory; UCX keeps it mapped until the transport closes.
    for (void* peer : s.mapped) cudaHostUnregister(peer);
    if (s.landing_registered_here) cudaHostUnregister(s.landing);
    if (s.signals_registered_here) cudaHostUnregister(s.net_signals);
    // The transport may still be asked (by a late peer) to write here until it
    // closes: the proxy frees this memory after the transport (UCX frees its own).
    if (!s.landing_from_transport) proxy->adopt_host_memory(s.landing);
    proxy->adopt_host_memory(s.send_mirror);
    if (!s.signals_from_transport) proxy->adopt_host_memory(s.net_signals);
  }
  if (s.map_peer != nullptr) cudaFree(s.map_peer);
  if (s.map_peer_signals != nullptr) cudaFree(s.map_peer_signals);
  if (s.nvl_peer != nullptr) cudaFree(s.nvl_peer);
  if (s.nvl_peer_signals != nullptr) cudaFree(s.nvl_peer_signals);
  // The symmetric buffers are released with the heap (a collective release is
  // not safe in a destructor).
}

const void* Window::recv_ptr(int peer) const {
  FERRY_ARG_CHECK(peer >= 0 && peer < device_.world_size, "Window::recv_ptr: no rank " << peer);
  if (comm_.topology().same_node(peer)) return device_.local;
  return state_->landing != nullptr ? state_->landing : device_.local;
}

const uint64_t* Window::signals_from(int peer) const {
  FERRY_ARG_CHECK(peer >= 0 && peer < device_.world_size, "Window::signals_from: no rank " << peer);
  const size_t offset = static_cast<size_t>(peer) * device_.num_signals;
  if (comm_.topology().same_node(peer)) return device_.nvl_signals + offset;
  return state_->net_signals + offset;
}

}  // namespace ferry
