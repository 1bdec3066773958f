// CUDA-graph timing for ferry-bench: an operation (or a sequence of steps)
// captured into graphs and replayed, median over replays, max over ranks.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "ferry/bootstrap.hpp"

namespace ferry::bench {

// One operation under test, enqueued on a stream (graph-capturable where possible).
struct TimedOp {
  std::string name;  // for messages
  std::function<void(cudaStream_t)> enqueue;
  // Waits for the stream and reports asynchronous failures (ferry: device
  // timeouts); defaults to a checked cudaStreamSynchronize.
  std::function<void(cudaStream_t)> synchronize;
};

struct TimingOptions {
  int ops_per_graph = 10;     // G back-to-back calls captured into one graph
  int warmup_replays = 5;
  int timed_replays = 0;      // 0: chosen from a probe so a case takes ~target_seconds
  double target_seconds = 0.1;
  int min_replays = 20;
  int max_replays = 300;
};

struct TimingResult {
  double op_us = 0;        // median over replays of (replay time / G); max over ranks
  int replays = 0;         // timed replays
  bool used_graph = true;  // false: the op could not be captured; timed eagerly
};

// Collective over `bootstrap` (every rank must call it with the same options).
// Captures G calls into a CUDA graph, warms up, then times each replay between
// two events. Falls back to launching the G calls directly (with a warning on
// rank 0) if capture fails with a CUDA error.
TimingResult time_op(const TimedOp& op, cudaStream_t stream, ferry::Bootstrap& bootstrap,
                     const TimingOptions& options);

double median(std::vector<double> values);
double max_over_ranks(ferry::Bootstrap& bootstrap, double value);  // collective

// `count` CUDA events, destroyed with it.
struct EventList {
  std::vector<cudaEvent_t> events;
  explicit EventList(size_t count, unsigned flags = cudaEventDefault);  // cudaEventCreateWithFlags
  ~EventList();
  EventList(const EventList&) = delete;
  EventList& operator=(const EventList&) = delete;
};

// Steps that must run in order (EP: dispatch, then combine), each timed on its own.
// One iteration enqueues every step with an event between consecutive steps; G
// iterations are captured into one CUDA graph whose event-record nodes time each
// step inside the replay. Per step: the median over all timed iterations, then the
// max over ranks. Without a graph (capture failed, or use_graph off) the same
// iterations are launched directly, with the same events.
struct TimedSequence {
  std::string name;  // for messages
  std::vector<std::function<void(cudaStream_t)>> steps;
  // Waits for the stream and reports asynchronous failures; defaults to a checked
  // cudaStreamSynchronize.
  std::function<void(cudaStream_t)> synchronize;
  // Where set: enqueued before every step and left out of the step's time (each step
  // then has an event of its own at its start), e.g. ferry-bench ep --aligned.
  std::function<void(cudaStream_t)> before_each;
};

struct SequenceTimingOptions {
  int iterations_per_graph = 10;  // G
  int warmup_iterations = 20;
  int timed_iterations = 0;       // 0: chosen from a probe so a case takes ~target_seconds
  double target_seconds = 0.2;
  int min_iterations = 100;
  int max_iterations = 2000;
  bool use_graph = true;
};

struct SequenceTimingResult {
  std::vector<double> step_us;  // per step: median over iterations, max over ranks
  int iterations = 0;           // timed iterations (a multiple of G)
  bool used_graph = true;
  std::string graph_failure;    // why capture failed ("" when used_graph or not tried)
};

// Collective over `bootstrap` (every rank calls it with the same options and steps).
// A capture that fails with a CudaError or NotSupported falls back to direct launches.
SequenceTimingResult time_sequence(const TimedSequence& sequence, cudaStream_t stream,
                                   ferry::Bootstrap& bootstrap, const SequenceTimingOptions& options);

}  // namespace ferry::bench
