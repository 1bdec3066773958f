// SmHog: a stand-in for a user's compute kernel that holds most of the GPU's
// SMs while ferry runs (issue 15: EP and AllReduce must progress with any
// number of free SMs). Each hog block takes a whole SM (all of its shared
// memory), so exactly `free_sms` SMs stay free for everything else of this
// process, until the hog is destroyed. While it runs, nothing may synchronize
// the whole device (cudaDeviceSynchronize, or cudaFree, which does), and no
// kernel may be launched for the first time (CUDA loads kernels lazily, and a
// load waits for running kernels): either waits for the hog, i.e. its 120 s
// limit. So run the calls once before holding the SMs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <string>

#include "common/test_util.hpp"

namespace ferry::testing {

class SmHog {
 public:
  // Launches the hog on its own stream and waits until every hog block is
  // resident. Throws std::runtime_error if they do not all become resident
  // within a few seconds (another client holds SMs: MPS with shared GPUs).
  explicit SmHog(int free_sms);
  ~SmHog();  // releases the SMs and waits for the hog to end
  SmHog(const SmHog&) = delete;
  SmHog& operator=(const SmHog&) = delete;

  int blocks() const { return blocks_; }
  int free_sms() const { return free_sms_; }

  // Why a hog would not restrict this rank alone, or "" when it does: ranks
  // sharing this GPU under MPS would fight over the free SMs (the kernels of
  // ranks on one GPU must then be resident together, NOTE [SM budget]), so
  // there the SMs are restricted with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE instead.
  static std::string unusable_reason(int ranks_sharing_device);

 private:
  int free_sms_ = 0;
  int blocks_ = 0;
  cudaStream_t stream_ = nullptr, control_ = nullptr;
  int* stop_ = nullptr;      // device memory the hog polls
  int* resident_ = nullptr;  // pinned, mapped: hog blocks that started
};

// Holds all SMs but `free_sms` on every rank (collective: every rank gets a hog,
// or none does and the test fails here).
inline std::unique_ptr<SmHog> hold_sms_on_every_rank(int free_sms) {
  std::unique_ptr<SmHog> hog;
  std::string error;
  try {
    hog = std::make_unique<SmHog>(free_sms);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!all_ranks(error.empty())) {
    ADD_FAILURE() << "could not hold the SMs: " << (error.empty() ? "(failed on another rank)" : error);
    hog.reset();
  }
  return hog;
}

}  // namespace ferry::testing
