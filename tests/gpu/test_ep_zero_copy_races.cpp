// The zero-copy rank-rows combine's waits (NOTE [EP zero-copy combine]) under a held-back rank: a sleep kernel on
// one rank's stream delays its row writes or its pulls, and no host synchronization separates the calls, so only
// the protocol keeps the other ranks from reading rows not yet written (the ready words, with their epochs) or from
// overwriting rows a peer still reads (the end of a combine waits for every peer's "consumed").
// Two combines run on one dispatch's handle: the second takes the first's rows negated, so a home that pulls a
// peer's rows of the other call gets the wrong sign, and rows not written yet are NaN (poisoned before the round).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/ep_reference.hpp"
#include "common/test_util.hpp"
#include "ferry/ep.hpp"
#include "gpu/ep_harness.hpp"
#include "gpu/ep_rank_rows_round.hpp"
#include "gpu/gpu_sleep.hpp"

namespace {

using namespace ferry::testing;
using namespace ferry::testing::ep_gpu;
namespace ep = ferry::testing::ep;

constexpr int kDelayMicroseconds = 20000;  // far longer than a call of this size, far below the wait timeout

enum class Delay {
  kBeforeFirstRows,     // the held-back rank writes its rows of combine 1 late: the others must wait for them
  kBeforeSecondRows,    // ... of combine 2: the others must not take combine 1's rows (the epoch of the ready word)
  kBetweenFirstHalves,  // it pulls late in combine 1 (combine_send, sleep, combine_recv): the others' combine 1
                        // must not return (and let their callers write combine 2's rows) before it has pulled
};

const char* delay_name(Delay d) {
  switch (d) {
    case Delay::kBeforeFirstRows: return "before its rows of combine 1";
    case Delay::kBeforeSecondRows: return "before its rows of combine 2";
    case Delay::kBetweenFirstHalves: return "between the halves of combine 1";
  }
  return "?";
}

std::vector<uint8_t> read_back(const void* device, size_t offset, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  if (bytes) CK(cudaMemcpy(host.data(), static_cast<const uint8_t*>(device) + offset, bytes, cudaMemcpyDeviceToHost));
  return host;
}

// One dispatch, then two combines of it with no host synchronization, `held_back` delayed where `delay` says.
// Collective; false on every rank if any rank threw.
bool two_combines_one_handle(Harness& h, Delay delay, int held_back, ep::Routing routing) {
  const EpConfig& c = h.config();
  const int me = mpi_rank(), H = c.hidden;
  const ep::Spec s = make_spec(c, shared().next_seed(), routing, ep::TokenCounts::kFull, false, 0);
  const std::vector<ep::RankInput> all = ep::make_all_inputs(s);
  const ep::RankInput& mine = all[me];
  const int n = mine.num_tokens;
  const std::string what = describe(c, s) + (c.own_rows_first ? " own_rows_first" : "") + ", rank " +
                           std::to_string(held_back) + " held back " + delay_name(delay);
  SCOPED_TRACE(what);

  // Combine 1 takes y, combine 2 -y (the sign bit flipped: every sum negates exactly).
  const std::vector<uint16_t> y1 = exact_combine_input(s, all, c.own_rows_first);
  std::vector<uint16_t> y2 = y1;
  for (uint16_t& v : y2) v ^= 0x8000u;
  const size_t row_bytes = size_t(H) * 2, y_bytes = y1.size() * 2;
  DevMem y1_dev, y2_dev, saved_out;
  y1_dev.ensure(y_bytes + 16);
  y2_dev.ensure(y_bytes + 16);
  saved_out.ensure(h.out_mem().size());
  if (y_bytes) {
    CK(cudaMemcpy(y1_dev.get(), y1.data(), y_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(y2_dev.get(), y2.data(), y_bytes, cudaMemcpyHostToDevice));
  }

  std::string error;
  cudaStream_t st = h.stream();
  try {
    EpBuffer& buf = h.buf();
    const TensorView input = buf.combine_input();
    void* const input_rows = const_cast<void*>(input.data);  // the caller writes its rows there
    h.upload(s, mine, false);
    // Rows not written yet read as NaN; out is poisoned (with its guard). poison_previous synchronizes, then a
    // barrier: every rank starts the round from here.
    CK(cudaMemsetAsync(input_rows, 0xFF, size_t(input.shape[0]) * row_bytes, st));
    h.poison_out();
    h.poison_previous();
    const DispatchResult r = buf.dispatch(h.tokens_view(s, n), h.idx_view(s, n, false), h.weights_view(s, n),
                                          TensorView(), st);
    h.remember(r);
    EXPECT_EQ(size_t(r.num_rows) * row_bytes, y_bytes) << "rows received";
    const TensorView rows(input.data, ferry::DataType::kBFloat16, {r.num_rows, H});
    const bool me_held = me == held_back;

    if (me_held && delay == Delay::kBeforeFirstRows) gpu_sleep(st, kDelayMicroseconds);
    if (y_bytes) CK(cudaMemcpyAsync(input_rows, y1_dev.get(), y_bytes, cudaMemcpyDeviceToDevice, st));
    if (me_held && delay == Delay::kBetweenFirstHalves) {
      buf.combine_send(rows, r.handle, st);
      gpu_sleep(st, kDelayMicroseconds);
      buf.combine_recv(r.handle, h.out_view(n), st);
    } else {
      buf.combine(rows, r.handle, h.out_view(n), st);
    }
    CK(cudaMemcpyAsync(saved_out.get(), h.out_mem().get(), h.out_mem().size(), cudaMemcpyDeviceToDevice, st));
    h.poison_out();

    if (me_held && delay == Delay::kBeforeSecondRows) gpu_sleep(st, kDelayMicroseconds);
    // NOTE [EP zero-copy combine]: once combine 1 is complete here, nobody reads these rows any more.
    if (y_bytes) CK(cudaMemcpyAsync(input_rows, y2_dev.get(), y_bytes, cudaMemcpyDeviceToDevice, st));
    buf.combine(rows, r.handle, h.out_view(n), st);
    CK(cudaStreamSynchronize(st));
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!all_ranks(error.empty())) {
    if (!error.empty()) ADD_FAILURE() << "threw: " << error;
    return false;
  }
  const ep::CombineRef ref = ep::combine_reference(s, mine, ep::ExpertKind::kStandIn);
  ep::CombineRef negated = ref;
  for (double& v : negated.ref) v = -v;
  const size_t out_bytes = size_t(n) * row_bytes;
  const std::vector<uint8_t> out1 = read_back(saved_out.get(), 0, out_bytes);
  // Everything after out[n, H] was poisoned.
  const std::vector<uint8_t> guard1 = read_back(saved_out.get(), out_bytes, h.out_mem().size() - out_bytes);
  std::vector<uint16_t> out1_rows(out_bytes / 2);
  if (out_bytes) std::memcpy(out1_rows.data(), out1.data(), out_bytes);
  verify_combine(out1_rows, guard1, ref, n, H, what + ": combine 1");
  std::vector<uint16_t> out2;
  std::vector<uint8_t> guard2;
  h.fetch_out(n, &out2, &guard2);
  verify_combine(out2, guard2, negated, n, H, what + ": combine 2 (rows negated)");
  return all_ranks(!::testing::Test::HasFailure());
}

// Every delay on the first and on the last rank, with rows in rank order and own rows first, uniform and skewed
// routing; the buffers also run a checked round before and after (ep_rank_rows_round.hpp).
TEST(EpZeroCopyCombine, HeldBackRank) {
  REQUIRE_EP();
  if (shared().comm->topology().num_nodes > 1) GTEST_SKIP() << "rank rows run inside one node";
  const int W = mpi_size();
  for (bool own_first : {false, true}) {
    Harness h(shared(), rank_rows_config(ferry::DataType::kBFloat16, 256, 2048, 8, 4, true, 1, 16, own_first,
                                         /*zero_copy_combine=*/true));
    ASSERT_TRUE(h.alive());
    forget_previous_round();
    ASSERT_TRUE(run_round(h, ep::Routing::kUniform, ep::TokenCounts::kFull));
    forget_previous_round();
    const std::vector<int> held_back_ranks = W > 1 ? std::vector<int>{0, W - 1} : std::vector<int>{0};
    for (Delay delay : {Delay::kBeforeFirstRows, Delay::kBeforeSecondRows, Delay::kBetweenFirstHalves})
      for (int held_back : held_back_ranks) {
        const ep::Routing routing = held_back == 0 ? ep::Routing::kUniform : ep::Routing::kZipf;
        ASSERT_TRUE(two_combines_one_handle(h, delay, held_back, routing));
      }
    ASSERT_TRUE(run_round(h, ep::Routing::kDrops, ep::TokenCounts::kVaried));
  }
}

}  // namespace
