// Communicator: topology, device choice, P2P reachability, the symmetric heap and
// the host-mapped device error record.
#include "ferry/communicator.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/driver_api.hpp"
#include "common/knobs.hpp"
#include "ferry/cuda_check.hpp"
#include "ferry/error.hpp"
#include "ferry/symmetric_heap.hpp"
#include "net/proxy.hpp"

namespace ferry {

namespace {

uint64_t timeout_ms_from(const CommunicatorOptions& options) {
  if (options.timeout.count() > 0) return static_cast<uint64_t>(options.timeout.count());
  return static_cast<uint64_t>(knobs::kTimeoutMs.value());
}

// NOTE [Device of a rank]
// -1: keep the device of a current context if the caller made one, else the
// rank's index among the ranks of its machine (Topology::host_rank), modulo the
// GPU count. Not its index in its node: virtual nodes (FERRY_RANKS_PER_NODE)
// that split one machine would all start at GPU 0 (2 GPUs as 2x1 put both ranks
// on GPU 0, and NCCL refused them), while the machine's ranks in order spread
// over its GPUs. With one node per machine both indices are the same.
int choose_device(int requested, int host_rank) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    FERRY_THROW(CudaError, "a Communicator needs a GPU, and " << no_gpu_reason(err, count));
  }
  if (requested >= 0) {
    FERRY_CHECK(requested < count, InvalidArgument,
                "CommunicatorOptions::device " << requested << " but only " << count << " devices are visible");
    return requested;
  }
  CUcontext current = nullptr;
  if (driver::ctx_get_current(&current) == CUDA_SUCCESS && current != nullptr) {
    CUdevice dev = 0;
    FERRY_CU_CHECK(driver::ctx_get_device(&dev));
    return static_cast<int>(dev);
  }
  return host_rank % count;
}

// The device error record and abort flag; the destructor and the failed-setup
// paths release them the same way.
void free_device_state(DeviceErrorState*& error, int32_t*& abort_flag) {
  if (error != nullptr) cudaFreeHost(error);
  if (abort_flag != nullptr) cudaFree(abort_flag);
  error = nullptr;
  abort_flag = nullptr;
}

struct DeviceId {
  char host[64];         // hostname: bus ids repeat across machines
  char bus_id[32];
  int32_t ok;            // local setup succeeded
  int32_t num_sms;
  char error[200];       // first part of the local error, if any
};

}  // namespace

Communicator::Communicator(std::shared_ptr<Bootstrap> bootstrap, CommunicatorOptions options)
    : bootstrap_(std::move(bootstrap)) {
  FERRY_ARG_CHECK(bootstrap_ != nullptr, "Communicator: bootstrap is null");
  topology_ = discover_topology(*bootstrap_);
  timeout_ns_ = timeout_ms_from(options) * 1000000ull;

  // Local setup may fail on one rank only; gather the outcome so every rank
  // throws instead of leaving the others waiting in the next collective.
  DeviceId mine{};
  std::string local_error;
  try {
    device_ = choose_device(options.device, topology_.host_rank);
    FERRY_CUDA_CHECK(cudaSetDevice(device_));
    FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_));
    FERRY_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus_id, sizeof(mine.bus_id), device_));
    gethostname(mine.host, sizeof(mine.host) - 1);
    mine.num_sms = num_sms_;
    void* host = nullptr;
    FERRY_CUDA_CHECK(cudaHostAlloc(&host, sizeof(DeviceErrorState), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, sizeof(DeviceErrorState));
    device_error_ = static_cast<DeviceErrorState*>(host);
    FERRY_CUDA_CHECK(cudaMalloc(&device_abort_, sizeof(int32_t)));
    FERRY_CUDA_CHECK(cudaMemset(device_abort_, 0, sizeof(int32_t)));
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    mine.ok = 1;
  } catch (const Error& e) {
    local_error = e.what();
    std::strncpy(mine.error, e.what(), sizeof(mine.error) - 1);
  }
  std::vector<DeviceId> all = bootstrap_->all_gather_value(mine);
  for (int r = 0; r < size(); ++r) {
    if (all[r].ok) continue;
    free_device_state(device_error_, device_abort_);
    if (r == rank()) FERRY_THROW(CudaError, "Communicator setup failed on rank " << r << ": " << local_error);
    FERRY_THROW(CudaError, "Communicator setup failed on rank " << r << ": " << all[r].error);
  }

  // NOTE [SM budget] (communicator.hpp).
  auto same_gpu = [&](int a, int b) {
    return std::strncmp(all[a].host, all[b].host, sizeof(all[a].host)) == 0 &&
           std::strncmp(all[a].bus_id, all[b].bus_id, sizeof(all[a].bus_id)) == 0;
  };
  sm_budget_ = num_sms_;
  for (int r = 0; r < size(); ++r) {
    int sharing = 0;
    for (int q = 0; q < size(); ++q) sharing += same_gpu(r, q);
    if (r == rank()) ranks_sharing_device_ = sharing;
    sm_budget_ = std::min(sm_budget_, std::max(1, all[r].num_sms / std::max(1, sharing)));
  }

  // Every local peer must be reachable over P2P: a clear error now, not a crash in
  // a kernel later. Peers on GPUs this process can't see are checked by the IPC
  // mapping instead.
  std::ostringstream unreachable;
  for (int peer : topology_.ranks_in_node) {
    if (peer == rank()) continue;
    int peer_device = -1;
    if (cudaDeviceGetByPCIBusId(&peer_device, all[peer].bus_id) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (peer_device == device_) continue;
    int can_access = 0;
    FERRY_CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, device_, peer_device));
    if (!can_access)
      unreachable << " rank " << peer << " (GPU " << all[peer].bus_id << ")";
  }
  const int my_unreachable = unreachable.str().empty() ? 0 : 1;
  std::vector<int> any = bootstrap_->all_gather_value(my_unreachable);
  for (int r = 0; r < size(); ++r) {
    if (!any[r]) continue;
    free_device_state(device_error_, device_abort_);
    if (r == rank())
      FERRY_THROW(NotSupported, "rank " << rank() << " (GPU " << all[rank()].bus_id
                                        << ") cannot reach local peers over peer-to-peer:" << unreachable.str());
    FERRY_THROW(NotSupported, "rank " << r << " cannot reach some of its local peers over peer-to-peer");
  }
  heap_ = std::make_unique<SymmetricHeap>(*bootstrap_, topology_, device_);
  if (topology_.num_nodes > 1) {
    // Ranks in other nodes: the UCX transport and this GPU's proxy thread. Every
    // rank either builds it or throws (the transport's creation is collective
    // and fails everywhere alike: built without UCX, or UCX refused).
    try {
      net::ProxyOptions proxy_options;
      proxy_options.cuda = true;
      proxy_options.device = device_;
      proxy_options.rank = rank();
      proxy_options.fifo_capacity =
          options.proxy_fifo_entries > 0 ? options.proxy_fifo_entries : knobs::kProxyFifoEntries.value();
      proxy_options.timeout = std::chrono::nanoseconds(timeout_ns_);
      proxy_options.error = device_error_;
      proxy_options.device_abort = device_abort_;
      proxy_ = std::make_unique<net::Proxy>(net::make_transport(*bootstrap_, topology_), proxy_options);
      proxy_->warm_up(*bootstrap_);  // NOTE [Proxy warm-up]
      // NOTE [Lazy loading and the proxy]
      // With CUDA's lazy module loading, the first launch of a kernel function
      // behind a kernel that is still running can hold a driver lock until that
      // kernel ends; the proxy's CUDA calls (and UCX's, which looks up memory
      // types) then wait on it, and a running kernel that waits for the proxy
      // never finishes: a hang until the timeout (seen on the H200 box: the
      // first exchange of every process). Kernels that run behind a
      // proxy-waiting kernel must be loaded first (CUDA_MODULE_LOADING=EAGER,
      // as NVSHMEM asks, or cudaFuncGetAttributes on each); say so once.
      static bool warned = false;
      if (!warned && rank() == 0 && driver::lazy_module_loading()) {
        warned = true;
        std::fprintf(stderr,
                     "ferry: warning: CUDA loads modules lazily (CUDA_MODULE_LOADING=LAZY, the default) and the "
                     "ranks span nodes: load every kernel before it runs behind a kernel that waits on another "
                     "node (CUDA_MODULE_LOADING=EAGER, or cudaFuncGetAttributes once per kernel), or the first "
                     "such launch can hang until the timeout (docs/internode.md)\n");
      }
    } catch (...) {
      heap_.reset();
      free_device_state(device_error_, device_abort_);
      throw;
    }
  }
}

Communicator::~Communicator() {
  cudaDeviceSynchronize();  // no kernel of ours may still use the heap
  proxy_.reset();           // stops the proxy thread, closes the transport
  heap_.reset();
  free_device_state(device_error_, device_abort_);
}

bool Communicator::aborted() const { return aborted_; }

bool Communicator::reaches_other_nodes_over_tcp_only() const {
  return proxy_ != nullptr && proxy_->transport().remote_lanes_all_tcp();
}

void Communicator::abort(const std::string& reason) const {
  if (!aborted_) {
    aborted_ = true;
    abort_reason_ = reason;
  }
}

// NOTE [Naming the dead rank]
// A device wait names the peer it waited for, which is not always the rank that
// died: with three or more ranks a survivor can wait on another survivor that
// itself waits on the dead rank (ring steps, hierarchical forwarding). So the
// first error of a communicator (a device timeout, or the proxy's transport
// failure) also asks the bootstrap which ranks are gone (Bootstrap::
// probe_liveness: not collective, bounded by min(timeout, 500 ms), never throws;
// NOTE [Bootstrap liveness] for TcpBootstrap) and adds "rank N is gone" (or that
// every rank answered, or which did not). Bootstraps that cannot tell (MPI, the
// Python callbacks) add nothing: there the message names the waited-for peer.
// Runs once per communicator: the error aborts it, later calls rethrow the text.
// A transport failure ("Connection reset by remote peer") can come before the
// dead process has finished exiting, its bootstrap sockets still open (seen on
// the H100: every rank answered 20 ms after the reset), so then the probe is
// repeated until a rank is gone, for at most min(timeout, 2 s).
namespace {
std::string liveness_note(Bootstrap& bootstrap, uint64_t timeout_ns, bool expect_gone) {
  const auto budget = std::chrono::milliseconds(std::max<uint64_t>(1, std::min<uint64_t>(timeout_ns / 1000000, 500)));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::min<uint64_t>(timeout_ns / 1000000, 2000));
  PeerLiveness live = bootstrap.probe_liveness(budget);
  while (expect_gone && live.known && live.gone.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    live = bootstrap.probe_liveness(budget);
  }
  auto ranks = [](const std::vector<int>& list, const char* one, const char* many) {
    std::ostringstream os;
    os << (list.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < list.size(); ++i) os << (i ? ", " : "") << list[i];
    os << (list.size() == 1 ? one : many);
    return os.str();
  };
  std::ostringstream os;
  if (!live.gone.empty())
    os << "; " << ranks(live.gone, " is gone", " are gone")
       << " (its bootstrap connection or listener is closed: the process exited or left the group)";
  if (!live.silent.empty())
    os << "; " << ranks(live.silent, " did not", " did not") << " answer a liveness probe within "
       << budget.count() << " ms";
  if (live.known && live.gone.empty() && live.silent.empty()) os << "; every other rank is alive (liveness probe)";
  return os.str();
}
}  // namespace

void Communicator::check() const {
  if (!aborted_ && proxy_ && proxy_->failed()) {
    // Proxy::check's TransportError, plus the ranks that are gone.
    std::ostringstream os;
    os << proxy_->failure_report() << liveness_note(*bootstrap_, timeout_ns_, true) << "; the communicator is aborted";
    abort(os.str());
    FERRY_THROW(TransportError, os.str());
  }
  if (!aborted_ && device_error_ != nullptr && device_error_->code != kDeviceOk) {
    std::ostringstream os;
    os << "device wait timed out on rank " << device_error_->rank << " waiting for peer rank "
       << device_error_->peer << " in phase '" << phase_name(device_error_->phase) << "' (expected flag >= "
       << device_error_->expected << ", saw " << device_error_->observed << ", timeout "
       << timeout_ns_ / 1000000 << " ms)";
    os << liveness_note(*bootstrap_, timeout_ns_, false);
    if (proxy_) os << "; " << proxy_->state();
    os << "; the communicator is aborted";
    abort(os.str());
    FERRY_THROW(TimeoutError, os.str());
  }
  if (aborted_) FERRY_THROW(AbortedError, "communicator was aborted earlier: " << abort_reason_);
}

void Communicator::synchronize(cudaStream_t stream) const {
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  check();
}

}  // namespace ferry
