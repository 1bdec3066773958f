// The max_recv_rows overflow case, shared by the expanded and the rank-rows
// tests (test_ep_api.cpp, test_ep_rank_rows.cpp): every token of every rank
// picks experts 0 and 1 (rank 0's) on a buffer whose output holds one row fewer
// than rank 0 then needs, so every rank's dispatch fails naming rank 0 and
// max_recv_rows (NOTE [EP overflow is collective]); then a dispatch that fits
// (no token picks an expert) and its combine, which must write zeros, work
// everywhere.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "ferry/error.hpp"
#include "gpu/ep_harness.hpp"

namespace ferry::testing::ep_gpu {

// h: a high-throughput buffer of T tokens, hidden H, top-K (K >= 2), with rank 0
// owning experts 0 and 1 and max_recv_rows one row short of that routing.
inline void expect_overflow_then_a_dispatch_that_fits(Harness& h, int T, int H, int K) {
  DevMem tok, idx, w, out;
  tok.ensure(size_t(T) * H * 2);
  idx.ensure(size_t(T) * K * 4);
  w.ensure(size_t(T) * K * 4);
  out.ensure(size_t(T) * H * 2);
  CK(cudaMemset(tok.get(), 0, tok.size()));
  CK(cudaMemset(w.get(), 0, w.size()));
  std::vector<int32_t> to_rank0(size_t(T) * K, -1);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < 2; ++k) to_rank0[size_t(t) * K + k] = k;  // experts 0 and 1: rank 0's
  CK(cudaMemcpy(idx.get(), to_rank0.data(), to_rank0.size() * 4, cudaMemcpyHostToDevice));
  const TensorView tv(tok.get(), DataType::kBFloat16, {T, H}), iv(idx.get(), DataType::kInt32, {T, K}),
      wv(w.get(), DataType::kFloat32, {T, K});
  const std::string msg = error_message<ferry::InvalidArgument>(
      [&] { return h.buf().dispatch(tv, iv, wv, TensorView(), h.stream()).num_rows; });
  EXPECT_TRUE(contains_ci(user_part(msg), "rank 0")) << msg;
  EXPECT_TRUE(contains_ci(user_part(msg), "max_recv_rows")) << msg;
  EXPECT_NO_THROW(h.buf().check_errors());  // reported once

  std::vector<int32_t> none(size_t(T) * K, -1);
  CK(cudaMemcpy(idx.get(), none.data(), none.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(out.get(), 0x7f, out.size()));  // poisoned: combine must write zeros
  DispatchResult r = h.buf().dispatch(tv, iv, wv, TensorView(), h.stream());
  // NOTE [EP own rows first]: then every own token is a row (with no expert).
  const int64_t rows = h.config().own_rows_first ? T : 0;
  EXPECT_EQ(r.num_rows, rows);
  if (h.config().layout == ferry::EpLayout::kRankRows) EXPECT_EQ(r.num_index_entries, 0);
  // NOTE [EP zero-copy combine]: on such a buffer the rows go into combine_input() (zeros: no expert's output).
  void* rows_mem = r.tokens;
  if (h.config().zero_copy_combine) {
    rows_mem = const_cast<void*>(h.buf().combine_input().data);
    CK(cudaMemsetAsync(rows_mem, 0, size_t(rows) * H * 2, h.stream()));
  }
  h.buf().combine(TensorView(rows_mem, DataType::kBFloat16, {rows, H}), r.handle,
                  TensorView(out.get(), DataType::kBFloat16, {T, H}), h.stream());
  CK(cudaStreamSynchronize(h.stream()));
  std::vector<uint16_t> host(size_t(T) * H);
  CK(cudaMemcpy(host.data(), out.get(), host.size() * 2, cudaMemcpyDeviceToHost));
  size_t nonzero = 0;
  for (uint16_t v : host) nonzero += v != 0;
  EXPECT_EQ(nonzero, 0u) << "combine of tokens without experts must write zeros";
}

}  // namespace ferry::testing::ep_gpu
