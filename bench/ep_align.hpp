// ferry-bench ep --aligned: every timed op starts on every rank together.
//
// NOTE [EP bench: aligned ops]
// The EP bench times each op with events on each rank and reports the max over
// ranks. A dispatch (or combine) on one rank ends when every peer's data has
// landed, so it also holds the time until the slowest peer started sending. Over
// a slow network the ranks then drift into anti-phase: on 2 ranks over tcp with 4
// streams (session 45 c3, EP trace, 2xH200), rank 0's dispatch took 2.4 ms and
// its combine 17.7, rank 1's dispatch 18.4 and its combine 1.9: one (dispatch,
// combine) iteration took ~20 ms, yet each op read ~18 ms as the max over ranks,
// and the two directions took turns on the wire. (Ranks drift apart whenever a
// transfer alone on the wire goes faster than two at once: the rank ahead gets
// its data out sooner, and its lead grows.) NCCL's all-to-all never shows it: the
// collective itself starts every rank's transfer together. So --aligned puts a
// ferry AllReduce of a few floats before every timed op, of ferry and of NCCL
// alike, outside the op's events: each op is timed from a common start, as in a
// model where other collectives keep the ranks in step. Without --aligned the
// figures are as before (and comparable with earlier sessions').
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "ferry/allreduce.hpp"
#include "ferry/communicator.hpp"

namespace ferry::bench {

class OpAligner {
 public:
  explicit OpAligner(Communicator& comm);  // collective; runs once eagerly
  ~OpAligner();
  OpAligner(const OpAligner&) = delete;
  OpAligner& operator=(const OpAligner&) = delete;

  void align(cudaStream_t stream);  // enqueues the AllReduce (graph-capturable)
  std::function<void(cudaStream_t)> step() {
    return [this](cudaStream_t s) { align(s); };
  }

 private:
  static constexpr size_t kCount = 256;
  AllReduce allreduce_;
  void* buffer_ = nullptr;
};

}  // namespace ferry::bench
