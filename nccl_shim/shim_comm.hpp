// The communicators libferry_nccl.so hands out (NOTE [Shim communicators]) and
// the ferry side behind them.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"

// NOTE [Shim communicators]
// nccl.h only declares `struct ncclComm`, so the shim defines it: the handle a
// program gets from ncclCommInit* is this record, which holds the real NCCL
// communicator every call forwards to and, where ferry could be set up on it,
// a ferry Communicator and AllReduce. ferry is bootstrapped over the real
// communicator itself (its all_gather is an ncclAllGather), so the unique id
// stays NCCL's. A record is never freed: a destroyed handle stays recognisable
// (kDead) and calls on it fail with ncclInvalidArgument instead of touching
// freed memory.
struct ncclComm {
  static constexpr uint64_t kLive = 0x6665727279636f6dull;  // "ferrycom"
  static constexpr uint64_t kDead = 0x64656164636f6d6dull;
  uint64_t magic = kLive;
  ncclComm_t real = nullptr;
  int rank = 0, size = 1, device = -1;
  std::unique_ptr<ferry::Communicator> comm;
  std::unique_ptr<ferry::AllReduce> allreduce;
  std::string no_ferry;  // why ferry does not serve this communicator ("" when it does)
  bool pass_through = false;  // a real NCCL handle seen through the shim (NOTE [Real handles reaching the shim])
  std::atomic<bool> suspended{false};  // between ncclCommSuspend and ncclCommResume (NCCL 2.30): on NCCL only
  // ncclAllReduce routes (ferryNcclShimStats, ferry_nccl_ext.h).
  std::atomic<uint64_t> allreduce_ferry{0}, allreduce_forwarded{0};
};

namespace ferry::nccl_shim {

// Wraps a real communicator that was just created (every rank of it calls this
// in the same order). with_ferry: try to set ferry up on it (collective);
// otherwise `why` says why not. Inside a group, only recorded (NOTE
// [Communicators made inside a group]).
ncclComm_t wrap(ncclComm_t real, bool with_ferry, const char* why);

// NOTE [Communicators made inside a group]
// NCCL lets ncclCommInit* and ncclCommSplit run between ncclGroupStart and
// ncclGroupEnd (nccl-tests creates its communicators so): the call only
// registers the communicator and NCCL initializes it at ncclGroupEnd. Its rank,
// size and device are unknown before that, and ferry's set-up (collective, over
// the real communicator) cannot run inside the caller's group. So wrap() only
// records such a communicator (calls on it forward meanwhile) and the outermost
// ncclGroupEnd finishes it: queries, then ferry's set-up, in creation order
// (the same on every rank). Communicators of one group on different GPUs (one
// process driving several) stay on NCCL: setting them up one after another
// would wait on a rank of the same process. A group that failed, or ended in
// ncclInProgress (non-blocking), leaves its communicators on NCCL.
void group_start();   // after a successful ncclGroupStart on this thread
int group_depth();    // ncclGroupStart nesting on this thread
void group_end(bool ok);  // after ncclGroupEnd (ok: it returned ncclSuccess) or ncclGroupSimulateEnd (false)

// The live record behind a handle; nullptr for null and for the shim's destroyed
// records; a pass-through record for a real NCCL handle (NOTE [Real handles
// reaching the shim], shim_comm.cpp).
ncclComm* live(ncclComm_t handle);
// Marks a handle destroyed (its ferry side released first).
void retire(ncclComm* c);

// Sets this thread's last error text and returns `code`.
ncclResult_t fail(ncclResult_t code, const std::string& text);
const char* last_error();  // "" when none
void clear_last_error();

bool shim_on();  // FERRY_NCCL_SHIM (read once)
bool log_on();   // FERRY_NCCL_SHIM_LOG (read once)

}  // namespace ferry::nccl_shim
