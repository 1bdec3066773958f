// ferry-bench ep --stages: where a call's time goes, by half, with the network's
// part taken out of the receive halves (ep_check.hpp, time_ep_stages). Eager
// launches and host waits between the halves, so no graph: each half's time is
// its events' elapsed time, median over iterations, max over ranks.
#include <chrono>
#include <thread>
#include <vector>

#include "ep_check.hpp"
#include "ferry/cuda_check.hpp"
#include "net/proxy.hpp"

namespace ferry::bench::ep_detail {
namespace {

// Runs fn between events[0] and events[1] on `stream`, waits, -> microseconds.
template <typename Fn> double time_on_stream(EventList& events, cudaStream_t stream, Fn&& fn) {
  FERRY_CUDA_CHECK(cudaEventRecord(events.events[0], stream));
  fn();
  FERRY_CUDA_CHECK(cudaEventRecord(events.events[1], stream));
  FERRY_CUDA_CHECK(cudaEventSynchronize(events.events[1]));
  float ms = 0;
  FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, events.events[0], events.events[1]));
  return 1e3 * ms;
}

// Every rank's previous half is done on its GPU, then settle_us for the network to deliver.
void settle(Bootstrap& bootstrap, int settle_us) {
  bootstrap.barrier();
  std::this_thread::sleep_for(std::chrono::microseconds(settle_us));
  bootstrap.barrier();
}

}  // namespace

StageTimes time_ep_stages(const StageCall& call, const Options& options, Bootstrap& bootstrap, cudaStream_t stream) {
  DispatchOptions no_sync;
  no_sync.sync_counts = false;
  const int iterations = options.iters > 0 ? std::min(options.iters, 50) : 20;
  const int warmup = 2;
  std::vector<double> times[4];
  EventList events(2);
  net::Proxy* proxy = call.comm.proxy();
  net::ProxyStats before;
  for (int i = 0; i < warmup + iterations; ++i) {
    if (i == warmup && proxy != nullptr) before = proxy->stats();
    double t[4];
    EpHandle handle;
    DispatchResult result;
    settle(bootstrap, options.stages_settle_us);
    t[0] = time_on_stream(events, stream, [&] {
      handle = call.ep.dispatch_send(call.tokens, call.topk_idx, call.topk_weights, call.scales, stream, no_sync);
    });
    settle(bootstrap, options.stages_settle_us);
    t[1] = time_on_stream(events, stream, [&] { result = call.ep.dispatch_recv(handle, stream, no_sync); });
    settle(bootstrap, options.stages_settle_us);
    t[2] = time_on_stream(events, stream, [&] { call.ep.combine_send(call.expert_outputs, result.handle, stream); });
    settle(bootstrap, options.stages_settle_us);
    t[3] = time_on_stream(events, stream, [&] { call.ep.combine_recv(result.handle, call.out, stream); });
    call.ep.check_errors();
    if (i >= warmup)
      for (int k = 0; k < 4; ++k) times[k].push_back(t[k]);
  }
  StageTimes s;
  if (proxy != nullptr) {
    const net::ProxyStats after = proxy->stats();
    s.proxy = true;
    s.proxy_descriptors = double(after.descriptors - before.descriptors) / iterations;
    s.proxy_puts = double(after.puts - before.puts) / iterations;
    s.proxy_issue_us = (after.issue_us - before.issue_us) / iterations;
    const uint64_t completed = after.completed - before.completed;
    s.proxy_done_us_per_request = completed > 0 ? (after.complete_us - before.complete_us) / completed : 0;
  }
  s.dispatch_send = max_over_ranks(bootstrap, median(times[0]));
  s.dispatch_recv_landed = max_over_ranks(bootstrap, median(times[1]));
  s.combine_send = max_over_ranks(bootstrap, median(times[2]));
  s.combine_recv_landed = max_over_ranks(bootstrap, median(times[3]));
  return s;
}

}  // namespace ferry::bench::ep_detail
