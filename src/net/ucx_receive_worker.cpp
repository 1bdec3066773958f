// The receive worker of a tcp-only transport: see ucx_receive_worker.hpp.
#include "net/ucx_receive_worker.hpp"

#include "common/knobs.hpp"
#include "ferry/error.hpp"
#include "net/idle_backoff.hpp"

namespace ferry::net {

ReceiveWorker::ReceiveWorker(ucp_context_h context) : idle_spins_(knobs::kProxyIdleSpins.value()) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // made and destroyed here, progressed by its thread in between
  const ucs_status_t created = ucp_worker_create(context, &params, &worker_);
  FERRY_CHECK(created == UCS_OK, Error,
              "ucp_worker_create (the receive worker) failed: " << ucs_status_string(created));
  ucp_address_t* address = nullptr;
  size_t address_bytes = 0;
  const ucs_status_t got = ucp_worker_get_address(worker_, &address, &address_bytes);
  if (got != UCS_OK) {
    ucp_worker_destroy(worker_);
    FERRY_THROW(Error, "ucp_worker_get_address (the receive worker) failed: " << ucs_status_string(got));
  }
  try {
    address_.assign(reinterpret_cast<const char*>(address), address_bytes);
    ucp_worker_release_address(worker_, address);
    thread_ = std::thread([this] { run(); });  // before any peer learns the address (its wire-up needs progress)
  } catch (...) {  // no destructor runs for a constructor that throws
    if (address_.empty()) ucp_worker_release_address(worker_, address);
    ucp_worker_destroy(worker_);
    throw;
  }
}

ReceiveWorker::~ReceiveWorker() {
  stop();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

void ReceiveWorker::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void ReceiveWorker::run() {
  IdleBackoff backoff(idle_spins_);
  while (!stop_.load(std::memory_order_acquire)) backoff.after_loop(ucp_worker_progress(worker_) != 0);
}

}  // namespace ferry::net
