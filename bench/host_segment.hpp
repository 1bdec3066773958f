// A named shared host segment registered with CUDA (one address on host and device): a landing buffer as UCX
// shared memory makes one (NOTE [Mapped peers]), for the probes of host memory between ranks of one host
// (host_peer_probe.cu, host_ce_probe.cu).
#pragma once

#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "ferry/bootstrap.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench {

// create: make the segment (its owner unlinks it); else map the one another rank made.
class Segment {
 public:
  Segment(const std::string& name, size_t bytes, bool create) : name_(name), bytes_(bytes), owner_(create) {
    const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) throw std::runtime_error("ferry-bench: shm_open " + name + " failed");
    if (create && ftruncate(fd, off_t(bytes)) != 0) {
      close(fd);
      throw std::runtime_error("ferry-bench: ftruncate " + name + " failed");
    }
    ptr_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ptr_ == MAP_FAILED) throw std::runtime_error("ferry-bench: mmap " + name + " failed");
    FERRY_CUDA_CHECK(cudaHostRegister(ptr_, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  }
  ~Segment() {
    cudaHostUnregister(ptr_);
    munmap(ptr_, bytes_);
    if (owner_) shm_unlink(name_.c_str());
  }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }

 private:
  std::string name_;
  size_t bytes_;
  bool owner_;
  void* ptr_ = nullptr;
};

// This rank's segment and the next rank's, mapped here (its own when alone), named by rank 0's pid and `tag`.
// Collective: every rank makes its own, then maps the next one's.
class SegmentRing {
 public:
  SegmentRing(Bootstrap& bootstrap, const std::string& tag, size_t bytes) {
    const int W = bootstrap.size(), me = bootstrap.rank(), next = (me + 1) % W;
    const int64_t run = bootstrap.all_gather_value(int64_t(getpid()))[0];
    auto name = [&](int r) { return "/ferry-" + tag + "-" + std::to_string(run) + "-" + std::to_string(r); };
    own_ = std::make_unique<Segment>(name(me), bytes, true);
    bootstrap.barrier();
    if (next != me) next_ = std::make_unique<Segment>(name(next), bytes, false);
    bootstrap.barrier();
  }
  uint8_t* own() const { return own_->get(); }
  uint8_t* next() const { return next_ ? next_->get() : own_->get(); }

 private:
  std::unique_ptr<Segment> own_, next_;
};

}  // namespace ferry::bench
