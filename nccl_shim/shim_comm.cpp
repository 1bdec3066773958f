// NOTE [Shim communicators] (shim_comm.hpp): wrapping, the registry of live
// handles, last errors, and ferry set up over the real communicator.
#include "shim_comm.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "common/knobs.hpp"
#include "ferry/bootstrap.hpp"
#include "ferry/error.hpp"
#include "real_nccl.hpp"

namespace ferry::nccl_shim {
namespace {

std::mutex g_mutex;
std::unordered_set<ncclComm*> g_made;  // every record ever made (never freed; retired ones are kDead)
thread_local std::string t_last_error;

// all_gather through the real NCCL on device staging buffers (ferry's bootstrap
// moves a few KB per call, at set-up only).
void nccl_all_gather(ncclComm_t real, int size, const void* send, void* recv, size_t bytes) {
  const RealNccl& r = real_nccl();
  void* d_send = nullptr;
  void* d_recv = nullptr;
  cudaStream_t stream = nullptr;
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) FERRY_THROW(CudaError, "libferry_nccl bootstrap: " << what << ": " << cudaGetErrorString(e));
  };
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaMalloc(&d_send, bytes ? bytes : 1), "cudaMalloc");
  check(cudaMalloc(&d_recv, bytes ? bytes * size : 1), "cudaMalloc");
  if (bytes) check(cudaMemcpy(d_send, send, bytes, cudaMemcpyHostToDevice), "copy in");
  const ncclResult_t res = r.ncclAllGather(d_send, d_recv, bytes, ncclUint8, real, stream);
  check(cudaStreamSynchronize(stream), "synchronize");
  if (bytes) check(cudaMemcpy(recv, d_recv, bytes * size, cudaMemcpyDeviceToHost), "copy out");
  cudaFree(d_send);
  cudaFree(d_recv);
  cudaStreamDestroy(stream);
  FERRY_CHECK(res == ncclSuccess, BootstrapError, "libferry_nccl bootstrap: ncclAllGather: " << r.ncclGetErrorString(res));
}

void set_up_ferry(ncclComm* c) {
  ncclComm_t real = c->real;
  const int size = c->size;
  auto bootstrap = std::make_shared<CallbackBootstrap>(
      c->rank, size, [real, size](const void* send, void* recv, size_t bytes) { nccl_all_gather(real, size, send, recv, bytes); },
      [real, size] {
        char byte = 0;
        std::vector<char> all(size);
        nccl_all_gather(real, size, &byte, all.data(), 1);
      });
  CommunicatorOptions options;
  options.device = c->device;
  try {
    c->comm = std::make_unique<Communicator>(bootstrap, options);
    c->allreduce = std::make_unique<AllReduce>(*c->comm, knobs::kNcclShimMaxBytes.value());
  } catch (const std::exception& e) {
    // Communicator and AllReduce fail on every rank together (their set-up is collective).
    c->allreduce.reset();
    c->comm.reset();
    c->no_ferry = std::string("ferry could not be set up: ") + e.what();
  }
}

}  // namespace

bool shim_on() {
  static const bool on = [] {
    try {
      return knobs::kNcclShim.value() == knobs::NcclShimMode::kOn;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "libferry_nccl: %s; forwarding every call to NCCL\n", e.what());
      return false;
    }
  }();
  return on;
}

bool log_on() {
  static const bool on = [] {
    try {
      return knobs::kNcclShimLog.value();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "libferry_nccl: %s\n", e.what());
      return false;
    }
  }();
  return on;
}

namespace {

struct Pending {
  ncclComm* c;
  bool with_ferry;
  std::string why;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_pending;  // made inside this thread's open group

void describe(ncclComm* c) {
  const RealNccl& r = real_nccl();
  r.ncclCommUserRank(c->real, &c->rank);
  r.ncclCommCount(c->real, &c->size);
  r.ncclCommCuDevice(c->real, &c->device);
}

void log_comm(const ncclComm* c) {
  if (log_on())
    std::fprintf(stderr, "[ferry-nccl] rank %d of %d (device %d): %s\n", c->rank, c->size, c->device,
                 c->no_ferry.empty() ? "ferry serves ncclAllReduce" : c->no_ferry.c_str());
}

// A communicator NCCL has initialized: its queries, then ferry where wanted.
void finish(ncclComm* c, bool with_ferry, const std::string& why) {
  describe(c);
  if (!shim_on())
    c->no_ferry = "FERRY_NCCL_SHIM=off";
  else if (!with_ferry)
    c->no_ferry = why;
  else {
    c->no_ferry.clear();
    set_up_ferry(c);
  }
  log_comm(c);
}

}  // namespace

ncclComm_t wrap(ncclComm_t real, bool with_ferry, const char* why) {
  auto* c = new ncclComm;
  c->real = real;
  if (t_group_depth > 0) {  // NOTE [Communicators made inside a group]
    c->no_ferry = "made inside ncclGroupStart/End, not initialized yet";
    t_pending.push_back({c, with_ferry, why});
  } else {
    finish(c, with_ferry, why);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_made.insert(c);
  return c;
}

void group_start() { ++t_group_depth; }

int group_depth() { return t_group_depth; }

void group_end(bool ok) {
  if (t_group_depth > 0) --t_group_depth;
  if (t_group_depth > 0 || t_pending.empty()) return;
  std::vector<Pending> made;
  made.swap(t_pending);
  if (!ok) {
    for (Pending& p : made) finish(p.c, false, "its ncclGroupEnd did not complete it (failed, or non-blocking)");
    return;
  }
  for (Pending& p : made) describe(p.c);
  bool one_device = true;
  for (const Pending& p : made) one_device &= p.c->device == made.front().c->device;
  for (Pending& p : made) {
    if (one_device) finish(p.c, p.with_ferry, p.why);
    else finish(p.c, false, "made in one group with communicators on other GPUs (one process, several GPUs)");
  }
}

// NOTE [Real handles reaching the shim]
// The real NCCL may call its own exported functions (ncclCommCount, ncclGroupStart,
// ...) through the dynamic linker, which then finds the shim's definitions first
// (LD_PRELOAD, or a program linked to the shim) and hands them a real
// communicator, not one of the shim's records. Such a handle is forwarded as it
// is, through a per-thread pass-through record without ferry; communicators
// split from one stay real handles too (never wrapped, never set up with ferry).
// Only null and the shim's own destroyed records are refused.
ncclComm* live(ncclComm_t handle) {
  if (handle == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_made.count(handle) != 0) return handle->magic == ncclComm::kLive ? handle : nullptr;  // else destroyed
  }
  thread_local ncclComm pass_through;
  pass_through.real = handle;
  pass_through.comm.reset();
  pass_through.allreduce.reset();
  pass_through.magic = ncclComm::kLive;
  pass_through.pass_through = true;
  pass_through.no_ferry = "a communicator of the real NCCL, not made through the shim";
  return &pass_through;
}

void retire(ncclComm* c) {
  c->allreduce.reset();
  c->comm.reset();
  std::lock_guard<std::mutex> lock(g_mutex);  // live() reads magic under it
  c->magic = ncclComm::kDead;
}

ncclResult_t fail(ncclResult_t code, const std::string& text) {
  t_last_error = text;
  return code;
}

const char* last_error() { return t_last_error.c_str(); }

void clear_last_error() {
  if (!t_last_error.empty()) t_last_error.clear();
}

}  // namespace ferry::nccl_shim
