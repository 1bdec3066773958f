// The UCX transport: UCP RMA (ucp_put_nbx), fence and flush, over whatever UCX picks (rc/dc mlx5 with GPUDirect on a cluster,
// tcp or shared memory here). Worker addresses and remote keys travel through
// ferry's bootstrap.
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/knobs.hpp"
#include "ferry/error.hpp"
#include "ferry/version.hpp"
#include "net/transport.hpp"
#include "net/ucx_config.hpp"
#include "net/ucx_endpoints.hpp"
#include "net/tcp_plan.hpp"
#include "net/ucx_regions.hpp"
#include "net/ucx_receive_worker.hpp"
#include "net/ucx_send_lanes.hpp"

namespace ferry::net {

namespace {

#define FERRY_UCS_CHECK(expr)                                                                         \
  do {                                                                                                \
    const ucs_status_t _st = (expr);                                                                  \
    FERRY_CHECK(_st == UCS_OK, ::ferry::Error, "UCX call " #expr " failed: " << ucs_status_string(_st)); \
  } while (0)

// Worker addresses travel in fixed frames so one all_gather carries every rank's.
constexpr size_t kMaxWorkerAddress = 4096;

struct AddressFrame {
  uint32_t bytes;  // 0: the address did not fit (or its worker failed)
  char address[kMaxWorkerAddress];
};

AddressFrame address_frame(const void* address, size_t bytes) {
  AddressFrame frame{};
  if (bytes > kMaxWorkerAddress) return frame;
  std::memcpy(frame.address, address, bytes);
  frame.bytes = static_cast<uint32_t>(bytes);
  return frame;
}

class UcxTransport final : public Transport {
 public:
  // A failure part way (UCX refusing an endpoint, FERRY_UCX_GPU_MEMORY=on without
  // a transport for GPU memory) releases what was made before it throws.
  UcxTransport(Bootstrap& bootstrap, const Topology& topology)
      : bootstrap_(bootstrap), topology_(topology), regions_(bootstrap, topology) {
    try {
      if (!start(/*shared_context=*/false)) {  // NOTE [A receive worker for tcp]: a context for two threads' workers
        release();
        start(/*shared_context=*/true);
      }
    } catch (...) {
      release();
      throw;
    }
  }

  ~UcxTransport() override { release(); }

  std::string describe() const override { return description_; }
  bool reaches(int peer) const override {
    return peer >= 0 && peer < static_cast<int>(endpoints_.size()) && endpoints_[peer] != nullptr;
  }
  bool moves_cuda_memory() const override { return moves_cuda_memory_; }
  bool detects_peer_failure() const override { return peer_failure_detection_; }
  // NOTE [Put pieces over tcp]
  // Where every remote endpoint is tcp with peer-failure handling, UCX emulates
  // puts (NOTE [tcp segments], ucx_config.cpp), and the proxy's 4 MiB pieces
  // (chosen for cuda_ipc and shared memory) leave few requests in flight. Both
  // ranks putting 4 MiB / 16 MiB to each other over loopback tcp (2-core CPU host,
  // ferry-bench net --both-ways, 5 rounds, GB/s per direction): 4 MiB pieces
  // 0.96-1.17 / 0.86-1.10, 256 KiB pieces 1.16-1.83 / 1.18-1.35, 64 KiB 1.20-1.33 /
  // 0.89-1.09; then 256 KiB against 4 MiB, alternating, 3 rounds: 1.63-1.90 /
  // 1.25-1.36 against 0.95-1.41 / 0.98-1.09 (docs/results/net_cpu_2cores_tcp_segments.txt).
  // Not yet measured on the GPU machines.
  size_t preferred_put_chunk() const override {
    if (lanes_ != nullptr) return size_t{1} << 20;  // NOTE [Several tcp streams]: one put spreads over the lanes
    return all_tcp_emulated() ? size_t{256} << 10 : 0;
  }
  bool remote_lanes_all_tcp() const override { return all_tcp_; }
  bool receives_on_own_thread() const override { return !receivers_.empty(); }
  int tcp_streams() const override { return lanes_ != nullptr ? lanes_->count() : 1; }

  int register_region(void* ptr, size_t bytes, bool cuda_memory, std::mutex& lock) override {
    ucp_mem_map_params_t map{};
    map.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                     UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    map.address = ptr;
    map.length = bytes;
    map.memory_type = cuda_memory ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    return with_lane_keys(regions_.map(context_, endpoints_, map, cuda_memory ? "CUDA" : "host", lock, nullptr));
  }

  int allocate_region(size_t bytes, void** ptr, std::mutex& lock) override {
    FERRY_ARG_CHECK(ptr != nullptr && bytes > 0, "allocate_region: no output pointer or no bytes");
    ucp_mem_map_params_t map{};
    map.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                     UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    map.address = nullptr;
    map.length = bytes;
    map.flags = UCP_MEM_MAP_ALLOCATE;
    map.memory_type = UCS_MEMORY_TYPE_HOST;
    return with_lane_keys(regions_.map(context_, endpoints_, map, "UCX-allocated host", lock, ptr));
  }

  void* peer_pointer(int peer, int region) const override { return regions_.peer_pointer(peer, region); }
  void deregister_region(int id) override {
    if (lanes_ != nullptr) lanes_->drop_keys(id);
    regions_.deregister(context_, id);
  }

  // NOTE [After a failure]: once an endpoint failed, nothing more is issued on
  // the worker (the communicator is aborted anyway): UCX aborts the process on
  // some operations that meet a failed endpoint (seen: a fence after a peer's
  // death, "Fatal: unexpected error: Endpoint timeout").
  Request put(int peer, const void* src, size_t bytes, int region, size_t offset, bool cuda_source) override {
    if (failed_) return nullptr;
    const UcxRegions::Region& target = regions_.target(peer, reaches(peer), region, offset, bytes);
    if (lanes_ != nullptr) {  // NOTE [Several tcp streams]: tcp alone, so host memory
      FERRY_CHECK(!cuda_source, InvalidArgument, "a GPU-memory put on tcp send lanes");
      return lanes_->put(peer, src, bytes, region, target.base[peer] + offset);
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;  // no guessing from the address
    param.memory_type = cuda_source ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    if (cuda_source) {
      // NOTE [GPU-memory puts]: UCX 1.22 honours memory_type only when it says
      // HOST; for CUDA it detects the type, through a cache that can miss a
      // cudaMalloc'd buffer and then "assumes host memory" (datatype_iter.inl,
      // ucp_context.h), so the put took the CPU-copy emulation and read device
      // memory from the host (a segfault on cuda_ipc). The source's own memh
      // carries the type it was mapped with: the source is always inside this
      // rank's part of the same region (the window, NOTE [Window staging]).
      const uint64_t begin = reinterpret_cast<uint64_t>(src), mine = target.base[topology_.rank];
      FERRY_CHECK(begin >= mine && begin + bytes <= mine + target.bytes[topology_.rank], InvalidArgument,
                  "a GPU-memory put's source is outside this rank's registered region " << region);
      param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      param.memh = target.memh;
    }
    return keep(ucp_put_nbx(endpoints_[peer], src, bytes, target.base[peer] + offset, target.keys[peer], &param),
                peer);
  }

  void fence() override {
    if (lanes_ != nullptr) return lanes_->fence();
    if (!failed_) FERRY_UCS_CHECK(ucp_worker_fence(worker_));
  }

  // NOTE [Requests name their peer]
  // A survivor's error must name the rank that died (tests/net/test_proxy_faults.cpp),
  // and a request may fail long after it was issued (CI once saw "a request failed:
  // Input/output error" over shared memory, which has no peer-failure handling). So
  // every UCX request carries its peer in the caller space UCX reserves in it
  // (ucp_params_t::request_size; the handle points at that space), and a flush is one
  // ucp_ep_flush_nbx per endpoint, whose failures name their peers, not one worker
  // flush, whose failure names none. With several endpoints still flushing, the
  // flush's handle is a FlushSet, told apart from UCX's handles by flush_sets_
  // (empty, so not looked up, while none is out); with one, it is that request.
  Request flush() override {
    if (lanes_ != nullptr) return lanes_->flush();
    if (failed_) return nullptr;
    std::vector<Request> pending;
    for (size_t r = 0; r < endpoints_.size() && !failed_; ++r) {  // NOTE [After a failure]
      if (endpoints_[r] == nullptr) continue;
      ucp_request_param_t param{};
      Request request = keep(ucp_ep_flush_nbx(endpoints_[r], &param), static_cast<int>(r));
      if (request != nullptr) pending.push_back(request);
    }
    if (pending.size() <= 1) return pending.empty() ? nullptr : pending[0];  // one request names its peer itself
    auto set = std::make_unique<FlushSet>();
    set->requests = std::move(pending);
    Request handle = set.get();
    flush_sets_.emplace(handle, std::move(set));
    return handle;
  }

  bool progress() override {
    const bool lanes = lanes_ != nullptr && lanes_->progress();
    return (ucp_worker_progress(worker_) != 0) || lanes;
  }

  bool test(Request request) override {
    if (lanes_ != nullptr) return lanes_->test(request);
    if (request == nullptr) return true;
    if (FlushSet* set = flush_set(request)) {
      while (!set->requests.empty() && test_one(set->requests.back())) set->requests.pop_back();
      if (!set->requests.empty()) return false;
      flush_sets_.erase(request);
      return true;
    }
    return test_one(request);
  }

  void cancel(Request request) override {
    if (lanes_ != nullptr) return lanes_->cancel(request);
    if (request == nullptr) return;
    if (FlushSet* set = flush_set(request)) {
      for (Request one : set->requests) cancel(one);
      flush_sets_.erase(request);
      return;
    }
    if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(worker_, request);
    ucp_request_free(request);
  }

  bool failed() const override { return failed_ || lanes_failed(); }
  int failed_peer() const override { return failure_is_the_lanes() ? lanes_->failed_peer() : failed_peer_; }
  std::string failure() const override { return failure_is_the_lanes() ? lanes_->failure() : failure_; }

 private:
  // false: every rank's endpoints are tcp alone and every rank asks for a receive worker, which needs a context
  // shared by two threads' workers; the caller releases everything and starts again with shared_context.
  bool start(bool shared_context) {
    failed_ = false;  // a restart: the first context's endpoints may have reported their peers' closing
    failed_peer_ = -1;
    failure_.clear();
    no_gpu_memory_endpoint_.clear();
    check_ucx_version();  // an older libucp than the headers: a clear error, not UCX's warning and a crash
    ucp_config_t* config = nullptr;
    FERRY_UCS_CHECK(ucp_config_read(nullptr, nullptr, &config));
    tcp_segments_ = set_tcp_segments(config);  // NOTE [tcp segments] (ucx_config.cpp)
    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_RMA;  // signals are puts (NOTE [Network signals], proxy.cpp)
    params.request_size = sizeof(int);  // a request's peer (NOTE [Requests name their peer])
    params.mt_workers_shared = shared_context ? 1 : 0;  // NOTE [A receive worker for tcp]
    const ucs_status_t init = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    FERRY_CHECK(init == UCS_OK, Error, "ucp_init failed: " << ucs_status_string(init));

    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the proxy's lock serializes callers
    FERRY_UCS_CHECK(ucp_worker_create(context_, &worker_params, &worker_));

    ucp_address_t* address = nullptr;
    size_t address_bytes = 0;
    FERRY_UCS_CHECK(ucp_worker_get_address(worker_, &address, &address_bytes));
    const AddressFrame mine = address_frame(address, address_bytes);
    ucp_worker_release_address(worker_, address);
    std::vector<AddressFrame> all = bootstrap_.all_gather_value(mine);
    for (int r = 0; r < topology_.size; ++r)
      FERRY_CHECK(all[r].bytes > 0, Error, "UCX worker address of rank " << r << " is larger than "
                                                                          << kMaxWorkerAddress << " bytes");

    endpoints_.assign(topology_.size, nullptr);
    const PeerFailureMode peer_failure = peer_failure_mode_from_env();
    peer_failure_detection_ = peer_failure.ask;
    for (int r = 0; r < topology_.size; ++r)
      if (!topology_.same_node(r)) endpoints_[r] = connect(r, all[r], peer_failure.ask);
    query_transports();
    const TcpAgain again = connect_tcp_again(all, peer_failure.drop_on_tcp, shared_context);
    if (again == TcpAgain::kOnASharedContext) {
      bootstrap_.barrier();  // every rank's endpoints exist before any closes
      return false;
    }
    if (again == TcpAgain::kConnected) query_transports();
    // Every endpoint is wired before anyone puts: a put to a peer whose worker
    // is not yet connected to us would wait for a wire-up that needs progress.
    // Errors the configuration makes on every rank come after it, so no rank
    // closes its worker while a peer still connects to it (seen over tcp: the
    // peer's ucp_ep_create then failed with "Destination is unreachable").
    bootstrap_.barrier();
    FERRY_CHECK(no_gpu_memory_endpoint_.empty(), NotSupported,
                "FERRY_UCX_GPU_MEMORY=on: the UCX endpoint to "
                    << no_gpu_memory_endpoint_
                    << " has no transport that moves GPU memory (an RDMA transport, or cuda_ipc on the same host); "
                       "set UCX_TLS to include one, or use FERRY_UCX_GPU_MEMORY=auto");
    return true;
  }

  // An endpoint to rank r, with UCX's peer-failure handling where asked and allowed.
  ucp_ep_h connect(int r, const AddressFrame& address, bool ask_peer_failure) {
    bool refused = false;
    ucp_ep_h endpoint = connect_endpoint(worker_, address.address, ask_peer_failure, &UcxTransport::on_endpoint_error,
                                         this, topology_.rank, r, refused);
    if (refused) peer_failure_detection_ = false;
    return endpoint;
  }

  // Where every rank's remote endpoints are tcp-only, all connect again: without UCX's peer-failure handling where
  // every rank has it and asks to drop it (drop_peer_failure: FERRY_UCX_PEER_FAILURE=auto; NOTE [tcp without UCX's
  // peer-failure handling], ucx_config.cpp), and to the peers' receive workers where every rank asks for them
  // (FERRY_UCX_RECEIVE_THREAD, NOTE [A receive worker for tcp]), which only a shared context can have.
  enum class TcpAgain { kNo, kConnected, kOnASharedContext };
  int tcp_streams_wanted() const {  // NOTE [tcp streams by default] (tcp_plan.hpp)
    const int64_t asked = knobs::kUcxTcpStreams.value();
    return asked > 0 ? static_cast<int>(asked) : auto_tcp_streams(usable_cpus(), topology_.host_size);
  }
  TcpAgain connect_tcp_again(const std::vector<AddressFrame>& all, bool drop_peer_failure, bool shared_context) {
    const bool remote = std::any_of(endpoints_.begin(), endpoints_.end(), [](ucp_ep_h e) { return e != nullptr; });
    const TcpWish mine{static_cast<uint8_t>(!remote ? TcpWish::kNone : (all_tcp_ ? TcpWish::kTcp : TcpWish::kOther)),
                       static_cast<uint8_t>(peer_failure_detection_), static_cast<uint8_t>(drop_peer_failure),
                       static_cast<uint8_t>(knobs::kUcxReceiveThread.value()),
                       static_cast<uint8_t>(tcp_streams_wanted())};
    const TcpPlan plan = plan_tcp_again(bootstrap_.all_gather_value(mine));
    const bool drop = plan.drop_peer_failure, receive = plan.receive_worker;
    if (!drop && !receive) return TcpAgain::kNo;
    if (receive && !shared_context) return TcpAgain::kOnASharedContext;
    // NOTE [Several tcp streams]: stream k's receive workers are targets[k]; the proxy's worker connects to the first.
    std::vector<std::vector<AddressFrame>> targets{all};
    if (receive) targets = start_receivers(plan.streams);
    std::vector<ucp_ep_h> replaced = endpoints_;
    for (int r = 0; r < topology_.size; ++r)
      if (replaced[r] != nullptr) endpoints_[r] = connect(r, targets[0][r], drop ? false : peer_failure_detection_);
    if (drop) peer_failure_detection_ = false;
    if (receive && plan.streams > 1) {
      std::vector<std::vector<std::string>> lanes(targets.size(), std::vector<std::string>(topology_.size));
      for (size_t k = 0; k < targets.size(); ++k)
        for (int r = 0; r < topology_.size; ++r)
          if (replaced[r] != nullptr) lanes[k][r].assign(targets[k][r].address, targets[k][r].bytes);
      lanes_ = std::make_unique<SendLanes>(context_, lanes, peer_failure_detection_, topology_.rank);
    }
    bootstrap_.barrier();  // every rank's new endpoints exist before any old one closes
    for (ucp_ep_h endpoint : replaced) close_by_force(worker_, endpoint);
    return TcpAgain::kConnected;
  }

  // `streams` receive workers, each with its thread, and every rank's addresses of them (by stream, then rank). A
  // rank that fails here still joins the exchanges (empty frames), so every rank fails together.
  std::vector<std::vector<AddressFrame>> start_receivers(int streams) {
    std::vector<std::vector<AddressFrame>> targets;
    std::string why;
    for (int k = 0; k < streams; ++k) {
      AddressFrame frame{};
      try {
        if (why.empty()) {
          receivers_.push_back(std::make_unique<ReceiveWorker>(context_));
          frame = address_frame(receivers_.back()->address().data(), receivers_.back()->address().size());
          if (frame.bytes == 0) why = "its address is larger than " + std::to_string(kMaxWorkerAddress) + " bytes";
        }
      } catch (const std::exception& e) {
        why = e.what();
      }
      targets.push_back(bootstrap_.all_gather_value(frame));
    }
    for (const std::vector<AddressFrame>& stream : targets)
      for (int r = 0; r < topology_.size; ++r)
        FERRY_CHECK(stream[r].bytes > 0, Error,
                    "the UCX receive worker of rank " << r << " failed" << (r == topology_.rank ? ": " + why : ""));
    return targets;
  }

  // Region `id` also on the send lanes (NOTE [Several tcp streams]).
  int with_lane_keys(int id) {
    if (lanes_ != nullptr) lanes_->add_keys(id, regions_.region(id).packed);
    return id;
  }

  bool lanes_failed() const { return lanes_ != nullptr && lanes_->failed(); }
  bool failure_is_the_lanes() const { return !failed_ && lanes_failed(); }  // else the worker's (or none)

  void release() noexcept {
    for (auto& receiver : receivers_) receiver->stop();  // nothing lands in a region after it is unmapped below
    lanes_.reset();  // its threads, keys, endpoints and workers
    regions_.drop_all_keys();
    for (ucp_ep_h endpoint : endpoints_) close_by_force(worker_, endpoint);
    regions_.unmap_all(context_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    receivers_.clear();
    if (context_ != nullptr) ucp_cleanup(context_);
    endpoints_.clear();
    worker_ = nullptr;
    context_ = nullptr;
  }

  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<UcxTransport*>(arg);
    const int peer = peer_of(self->endpoints_, ep);
    if (peer < 0) return;  // an endpoint replaced at start (NOTE [tcp without UCX's peer-failure handling])
    self->record_failure(peer, status, "the endpoint");
  }

  void record_failure(int peer, ucs_status_t status, const char* what) {
    if (failed_) return;
    failed_ = true;
    failed_peer_ = peer;
    failure_ = failure_text(what, peer, status);
  }

  Request keep(ucs_status_ptr_t request, int peer) {
    if (request == nullptr) return nullptr;
    if (UCS_PTR_IS_ERR(request)) {
      record_failure(peer, UCS_PTR_STATUS(request), "an operation");
      return nullptr;
    }
    *static_cast<int*>(request) = peer;  // NOTE [Requests name their peer]
    return request;
  }

  // One UCX request: true once finished (then freed); a failure is recorded with its peer.
  bool test_one(Request request) {
    const ucs_status_t status = ucp_request_check_status(request);
    if (status == UCS_INPROGRESS) return false;
    if (status != UCS_OK) record_failure(*static_cast<const int*>(request), status, "a request");
    ucp_request_free(request);
    return true;
  }

  struct FlushSet {
    std::vector<Request> requests;  // one per endpoint, not yet finished
  };
  FlushSet* flush_set(Request request) const {
    if (flush_sets_.empty()) return nullptr;
    const auto found = flush_sets_.find(request);
    return found == flush_sets_.end() ? nullptr : found->second.get();
  }

  // Which transports the endpoints use, and whether they move CUDA memory.
  void query_transports() {
    const knobs::UcxGpuMemory mode = knobs::kUcxGpuMemory.value();
    const RemoteTransports remote = query_remote_transports(endpoints_, mode);
    moves_cuda_memory_ = remote.all_cuda;
    all_tcp_ = remote.all_tcp;
    if (mode == knobs::UcxGpuMemory::kOn && remote.any && !remote.all_cuda)
      no_gpu_memory_endpoint_ = remote.without_cuda;
    description_ = remote.text;
    if (!peer_failure_detection_) description_ += " (no peer-failure detection)";
    if (!tcp_segments_.empty()) description_ += " (tcp segments " + tcp_segments_ + ")";
    if (!receivers_.empty()) description_ += " (receive thread)";
    if (lanes_ != nullptr) description_ += " (" + std::to_string(lanes_->count()) + " tcp streams)";
  }

  Bootstrap& bootstrap_;
  const Topology& topology_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<std::unique_ptr<ReceiveWorker>> receivers_;  // tcp alone: NOTE [A receive worker for tcp], one a stream
  std::unique_ptr<SendLanes> lanes_;  // tcp alone, several streams: NOTE [Several tcp streams]
  std::vector<ucp_ep_h> endpoints_;  // by rank; nullptr in the node
  UcxRegions regions_;
  std::unordered_map<Request, std::unique_ptr<FlushSet>> flush_sets_;  // NOTE [Requests name their peer]
  bool moves_cuda_memory_ = false;
  std::string no_gpu_memory_endpoint_;  // FERRY_UCX_GPU_MEMORY=on: the first endpoint without such a transport
  bool peer_failure_detection_ = true;
  bool all_tcp_ = false;  // every remote endpoint is tcp only
  // Every remote endpoint is tcp with peer-failure handling: UCX emulates its puts (NOTE [Put pieces over tcp]).
  bool all_tcp_emulated() const { return all_tcp_ && peer_failure_detection_; }
  std::string description_;
  std::string tcp_segments_;  // what set_tcp_segments asked UCX for, for describe()
  bool failed_ = false;
  int failed_peer_ = -1;
  std::string failure_;
};

}  // namespace

std::unique_ptr<Transport> make_transport(Bootstrap& bootstrap, const Topology& topology) {
  return std::make_unique<UcxTransport>(bootstrap, topology);
}

bool transport_available() { return true; }

}  // namespace ferry::net
