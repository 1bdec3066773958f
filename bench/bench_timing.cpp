#include "bench_timing.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include "bench_common.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench {

namespace {

struct GraphHolder {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~GraphHolder() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

// Ends a capture that was abandoned and clears the error it left behind.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t broken = nullptr;
  cudaStreamEndCapture(stream, &broken);
  if (broken != nullptr) cudaGraphDestroy(broken);
  (void)cudaGetLastError();
}

// Returns false if the op cannot be captured (a CUDA error during capture or
// instantiation); argument errors and other failures propagate.
bool capture_graph(const TimedOp& op, cudaStream_t stream, int ops, GraphHolder& holder) {
  // Thread-local mode: helper threads (NCCL's proxy) may call CUDA meanwhile.
  FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < ops; ++i) op.enqueue(stream);
  } catch (const ferry::CudaError&) {
    abandon_capture(stream);
    return false;
  } catch (...) {
    abandon_capture(stream);
    throw;
  }
  if (cudaStreamEndCapture(stream, &holder.graph) != cudaSuccess ||
      cudaGraphInstantiate(&holder.exec, holder.graph, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace

EventList::EventList(size_t count, unsigned flags) {
  events.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    cudaEvent_t event = nullptr;
    FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
    events.push_back(event);
  }
}

EventList::~EventList() {
  for (cudaEvent_t event : events) cudaEventDestroy(event);
}

double max_over_ranks(ferry::Bootstrap& bootstrap, double value) {
  const std::vector<double> all = bootstrap.all_gather_value(value);
  return *std::max_element(all.begin(), all.end());
}

double median(std::vector<double> values) {
  FERRY_ARG_CHECK(!values.empty(), "median of no values");
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

TimingResult time_op(const TimedOp& op, cudaStream_t stream, ferry::Bootstrap& bootstrap,
                     const TimingOptions& options) {
  const int ops = std::max(1, options.ops_per_graph);
  auto synchronize = [&] {
    if (op.synchronize) {
      op.synchronize(stream);
    } else {
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  };

  TimingResult result;
  GraphHolder graph;
  result.used_graph = capture_graph(op, stream, ops, graph);
  if (!result.used_graph && bootstrap.rank() == 0) {
    std::printf("warning: %s: capture into a CUDA graph failed; timing direct launches instead\n",
                op.name.c_str());
  }
  auto replay = [&] {
    if (graph.exec != nullptr) {
      FERRY_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream));
    } else {
      for (int i = 0; i < ops; ++i) op.enqueue(stream);
    }
  };
  // Times `count` back-to-back replays, one event pair (shared boundaries) each.
  auto time_replays = [&](int count) {
    EventList events(static_cast<size_t>(count) + 1);
    FERRY_CUDA_CHECK(cudaEventRecord(events.events[0], stream));
    for (int i = 0; i < count; ++i) {
      replay();
      FERRY_CUDA_CHECK(cudaEventRecord(events.events[static_cast<size_t>(i) + 1], stream));
    }
    synchronize();
    std::vector<double> replay_ms(static_cast<size_t>(count));
    for (size_t i = 0; i < replay_ms.size(); ++i) {
      float ms = 0;
      FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.events[i], events.events[i + 1]));
      replay_ms[i] = ms;
    }
    return replay_ms;
  };

  for (int i = 0; i < options.warmup_replays; ++i) replay();
  synchronize();

  result.replays = options.timed_replays;
  if (result.replays <= 0) {
    // All ranks must replay the same number of times: size from the slowest rank.
    const double probe_ms = max_over_ranks(bootstrap, median(time_replays(3)));
    const double wanted = options.target_seconds * 1e3 / std::max(probe_ms, 1e-3);
    result.replays = static_cast<int>(std::clamp(std::ceil(wanted), double(options.min_replays),
                                                 double(options.max_replays)));
  }
  const double median_replay_ms = median(time_replays(result.replays));
  result.op_us = max_over_ranks(bootstrap, median_replay_ms * 1e3 / ops);
  return result;
}

SequenceTimingResult time_sequence(const TimedSequence& sequence, cudaStream_t stream, ferry::Bootstrap& bootstrap,
                                   const SequenceTimingOptions& options) {
  FERRY_ARG_CHECK(!sequence.steps.empty(), "time_sequence: " << sequence.name << " has no steps");
  const int iterations_per_graph = std::max(1, options.iterations_per_graph);
  const size_t steps = sequence.steps.size();
  const size_t segments = static_cast<size_t>(iterations_per_graph) * steps;
  // Boundary b (0..segments) is one event; step s of iteration i runs from event
  // i * steps + s to the next one. With before_each, segment k has its own start
  // event (2k) after the untimed work, and its end (2k + 1).
  const bool gaps = static_cast<bool>(sequence.before_each);
  EventList events(gaps ? 2 * segments : segments + 1);
  auto start_of = [&](size_t segment) { return gaps ? 2 * segment : segment; };
  auto end_of = [&](size_t segment) { return gaps ? 2 * segment + 1 : segment + 1; };
  auto synchronize = [&] {
    if (sequence.synchronize) {
      sequence.synchronize(stream);
    } else {
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  };
  // Inside a capture, external event records: event-record nodes (timed on every
  // replay), not the fork/join dependencies of a plain record. Launched directly
  // (no graph), plain records: cudaEventRecordExternal outside a capture is an
  // illegal state (--no-graph failed so until session 45).
  auto enqueue_iterations = [&](bool capturing) {
    const unsigned flags = capturing ? cudaEventRecordExternal : cudaEventRecordDefault;
    auto record = [&](size_t event) {
      FERRY_CUDA_CHECK(cudaEventRecordWithFlags(events.events[event], stream, flags));
    };
    size_t segment = 0;
    for (int i = 0; i < iterations_per_graph; ++i) {
      for (const auto& step : sequence.steps) {
        if (gaps) sequence.before_each(stream);
        if (gaps || segment == 0) record(start_of(segment));
        step(stream);
        record(end_of(segment++));
      }
    }
  };

  SequenceTimingResult result;
  result.used_graph = false;
  GraphHolder graph;
  if (options.use_graph) {
    FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_iterations(/*capturing=*/true);
      if (cudaStreamEndCapture(stream, &graph.graph) != cudaSuccess ||
          cudaGraphInstantiate(&graph.exec, graph.graph, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        result.graph_failure = "ending the capture or instantiating the graph failed";
      } else {
        result.used_graph = true;
      }
    } catch (const ferry::CudaError& e) {
      abandon_capture(stream);
      result.graph_failure = e.what();
    } catch (const ferry::NotSupported& e) {
      abandon_capture(stream);
      result.graph_failure = e.what();
    } catch (...) {
      abandon_capture(stream);
      throw;
    }
    if (!result.used_graph && bootstrap.rank() == 0) {
      std::printf("warning: %s: capture into a CUDA graph failed (%s); timing direct launches instead\n",
                  sequence.name.c_str(), result.graph_failure.c_str());
    }
  }
  auto replay = [&] {
    if (result.used_graph) {
      FERRY_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream));
    } else {
      enqueue_iterations(/*capturing=*/false);
    }
  };
  // Runs `replays` replays; appends each step's time (ms) of every iteration.
  auto time_replays = [&](int replays, std::vector<std::vector<double>>& step_ms) {
    step_ms.resize(steps);
    for (int r = 0; r < replays; ++r) {
      replay();
      synchronize();  // the next replay records the same events again
      for (size_t segment = 0; segment < segments; ++segment) {
        float ms = 0;
        FERRY_CUDA_CHECK(
            cudaEventElapsedTime(&ms, events.events[start_of(segment)], events.events[end_of(segment)]));
        step_ms[segment % steps].push_back(ms);
      }
    }
  };

  const int warmup_replays = (std::max(0, options.warmup_iterations) + iterations_per_graph - 1) / iterations_per_graph;
  for (int r = 0; r < warmup_replays; ++r) replay();
  synchronize();

  int replays = (options.timed_iterations + iterations_per_graph - 1) / iterations_per_graph;
  if (options.timed_iterations <= 0) {
    // Every rank must replay the same number of times: size from the slowest rank.
    std::vector<std::vector<double>> probe;
    time_replays(2, probe);
    double iteration_ms = 0;
    for (const auto& ms : probe) iteration_ms += median(ms);
    iteration_ms = max_over_ranks(bootstrap, iteration_ms);
    const double wanted = std::clamp(std::ceil(options.target_seconds * 1e3 / std::max(iteration_ms, 1e-4)),
                                     double(options.min_iterations), double(options.max_iterations));
    replays = static_cast<int>(std::ceil(wanted / iterations_per_graph));
  }
  replays = std::max(replays, 1);
  std::vector<std::vector<double>> step_ms;
  time_replays(replays, step_ms);
  result.iterations = replays * iterations_per_graph;
  for (const auto& ms : step_ms) result.step_us.push_back(max_over_ranks(bootstrap, median(ms) * 1e3));
  return result;
}

}  // namespace ferry::bench
