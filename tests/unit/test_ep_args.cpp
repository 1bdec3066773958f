// EP argument checks at the API boundary (src/ep/ep_args.hpp) and TensorView,
// no GPU: the config, the derived sizes, and the tensors of dispatch and combine.
// Every rejection is an InvalidArgument whose message names the argument and the
// value it got; valid configs and calls pass and report what they found.
// Pointers are fake device addresses (ep_args_fixtures.hpp): the checks must not
// dereference them. Call order, handles, devices and names: test_ep_calls.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ep/ep_args.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"
#include "unit/ep_args_fixtures.hpp"

namespace {

using namespace ferry::testing::ep_args;
using ferry::ep::validate_config;
using ferry::ep::worst_case_recv_rows;
using ferry::testing::contains_ci;
using ferry::testing::names_number;

std::string config_rejected(const EpConfig& c, int world, std::initializer_list<const char*> names) {
  return rejected([&] { validate_config(c, world); }, names);
}

// ---------------------------------------------------------------- TensorView
TEST(EpTensorView, NumelContiguityDescribe) {
  EXPECT_EQ(TensorView(kTok, DataType::kBFloat16, {128, 7168}).numel(), 128 * 7168);
  EXPECT_EQ(TensorView(kTok, DataType::kBFloat16, {0, 7168}).numel(), 0);
  EXPECT_EQ(TensorView(kTok, DataType::kFloat32, {2, 3, 4}).numel(), 24);
  EXPECT_EQ(TensorView(kTok, DataType::kInt64, {5}).numel(), 5);
  EXPECT_EQ(TensorView(kTok, DataType::kBFloat16, {int64_t{1} << 20, 8192}).numel(), int64_t{1} << 33);

  EXPECT_TRUE(TensorView(kTok, DataType::kBFloat16, {128, 7168}).is_contiguous());
  EXPECT_TRUE(TensorView(kTok, DataType::kBFloat16, {128, 7168}, {7168, 1}).is_contiguous());
  EXPECT_TRUE(TensorView(kTok, DataType::kFloat32, {2, 3, 4}, {12, 4, 1}).is_contiguous());
  EXPECT_FALSE(TensorView(kTok, DataType::kBFloat16, {128, 7168}, {7169, 1}).is_contiguous());
  EXPECT_FALSE(TensorView(kTok, DataType::kBFloat16, {128, 7168}, {2 * 7168, 1}).is_contiguous());
  EXPECT_FALSE(TensorView(kTok, DataType::kBFloat16, {128, 7168}, {1, 128}).is_contiguous());
  EXPECT_FALSE(TensorView(kTok, DataType::kFloat32, {2, 3, 4}, {12, 4, 2}).is_contiguous());

  EXPECT_EQ(TensorView(kTok, DataType::kBFloat16, {128, 7168}).describe(), "bfloat16[128, 7168]");
  EXPECT_EQ(TensorView(kTok, DataType::kInt32, {4, 8}).describe(), "int32[4, 8]");
  EXPECT_EQ(TensorView(kTok, DataType::kFloat8E4M3, {2, 3, 128}).describe(), "float8_e4m3[2, 3, 128]");
  EXPECT_EQ(TensorView(kTok, DataType::kFloat32, {7}).describe(), "float32[7]");

  EXPECT_TRUE(TensorView().empty());
  EXPECT_FALSE(TensorView(kTok, DataType::kBFloat16, {1, 128}).empty());
}

TEST(EpTensorView, ModeNames) {
  const std::string ht = ferry::ep_mode_name(EpMode::kHighThroughput), ll = ferry::ep_mode_name(EpMode::kLowLatency);
  EXPECT_FALSE(ht.empty());
  EXPECT_FALSE(ll.empty());
  EXPECT_NE(ht, ll);
}

// ---------------------------------------------------------------- config
TEST(EpArgs, ValidConfigsAreAccepted) {
  for (int world : {1, 2, 3, 4, 5, 6, 7, 8}) {
    SCOPED_TRACE("world " + std::to_string(world));
    for (EpMode mode : {EpMode::kHighThroughput, EpMode::kLowLatency})
      for (DataType dt : {DataType::kBFloat16, DataType::kFloat8E4M3}) {
        EXPECT_NO_THROW(validate_config(config(4096, 7168, 8, world * 32, dt, mode), world));
        EXPECT_NO_THROW(validate_config(config(1, 128, 1, world, dt, mode), world));
        EXPECT_NO_THROW(validate_config(config(128, 2048, 16, world * 16, dt, mode, false), world));  // K == 16
        EXPECT_NO_THROW(validate_config(config(128, 2048, world, world, dt, mode), world));          // K == E
      }
    EXPECT_NO_THROW(validate_config(config(512, 4096, 8, world * 8, DataType::kBFloat16, EpMode::kHighThroughput, true, 128), world));
    EXPECT_NO_THROW(validate_config(config(512, 4096, 8, world * 8, DataType::kBFloat16, EpMode::kHighThroughput, true, 7), world));
  }
  EpConfig c = config();
  c.num_sms = 24;
  EXPECT_NO_THROW(validate_config(c, 4));
  c.num_sms = 0;
  c.max_recv_rows = 1 << 20;
  EXPECT_NO_THROW(validate_config(c, 4));
}

TEST(EpArgs, ConfigRejectsNonPositiveSizes) {
  for (int bad : {0, -1, -128}) {
    SCOPED_TRACE("value " + std::to_string(bad));
    EpConfig c = config();
    c.max_tokens_per_rank = bad;
    config_rejected(c, 4, {"max_tokens_per_rank"});
    c = config();
    c.hidden = bad;
    config_rejected(c, 4, {"hidden"});
    c = config();
    c.topk = bad;
    config_rejected(c, 4, {"topk"});
    c = config();
    c.num_experts = bad;
    config_rejected(c, 4, {"num_experts"});
  }
}

TEST(EpArgs, ConfigRejectsHiddenNotMultipleOf128) {
  for (int h : {64, 100, 129, 7000, 7169}) {
    SCOPED_TRACE("hidden " + std::to_string(h));
    EpConfig c = config();
    c.hidden = h;
    const std::string msg = config_rejected(c, 4, {"hidden"});
    EXPECT_TRUE(names_number(msg, static_cast<unsigned>(h))) << "should name " << h << ": " << msg;
  }
}

TEST(EpArgs, ConfigRejectsTopkOutOfRange) {
  for (int k : {17, 32}) {
    const std::string msg = config_rejected(config(64, 1024, k, 64), 4, {"topk"});
    EXPECT_TRUE(names_number(msg, static_cast<unsigned>(k))) << msg;
  }
  // More experts per token than experts.
  config_rejected(config(64, 1024, 8, 4), 4, {"topk", "num_experts"});
  config_rejected(config(64, 1024, 3, 2), 1, {"topk", "num_experts"});
}

TEST(EpArgs, ConfigRejectsExpertsNotDivisibleByWorld) {
  for (auto [experts, world] : {std::pair{63, 8}, std::pair{6, 4}, std::pair{16, 3}, std::pair{4, 8}}) {
    SCOPED_TRACE(std::to_string(experts) + " experts on " + std::to_string(world));
    const std::string msg = config_rejected(config(64, 1024, 2, experts), world, {"num_experts"});
    EXPECT_TRUE(names_number(msg, static_cast<unsigned>(experts))) << msg;
  }
}

TEST(EpArgs, ConfigRejectsOtherDispatchTypes) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64, DataType::kInt32, DataType::kInt64,
                     static_cast<DataType>(99)}) {
    SCOPED_TRACE(ferry::dtype_name(t));
    config_rejected(config(64, 1024, 4, 16, t), 4, {"dispatch_type"});
  }
}

TEST(EpArgs, ConfigRejectsBadAlignmentSmsAndMode) {
  for (int a : {0, -1, -128}) {
    EpConfig c = config();
    c.expert_alignment = a;
    config_rejected(c, 4, {"expert_alignment"});
  }
  for (int sms : {-1, -24}) {
    EpConfig c = config();
    c.num_sms = sms;
    config_rejected(c, 4, {"num_sms"});
  }
  EpConfig c = config();
  c.mode = static_cast<EpMode>(7);
  config_rejected(c, 4, {"mode"});
}

// ---------------------------------------------------------------- worst case rows
TEST(EpArgs, WorstCaseRecvRows) {
  struct Case {
    int world, tokens, topk, experts, align;
    int64_t want;  // world * T * min(K, Le) + Le * (alignment - 1)
  };
  for (const Case& k : {Case{8, 4096, 8, 256, 1, int64_t{8} * 4096 * 8},
                        Case{8, 128, 8, 16, 128, 8 * 128 * 2 + 2 * 127},
                        Case{1, 7, 3, 3, 16, 1 * 7 * 3 + 3 * 15},
                        Case{4, 100, 1, 8, 1, 400},
                        Case{2, 512, 6, 6, 128, 2 * 512 * 3 + 3 * 127},
                        Case{3, 10, 16, 48, 2, 3 * 10 * 16 + 16 * 1},
                        Case{8, 1 << 28, 16, 128, 1, int64_t{8} << 32}}) {  // past 32 bits
    SCOPED_TRACE("world " + std::to_string(k.world) + " T " + std::to_string(k.tokens) + " K " + std::to_string(k.topk) +
                 " E " + std::to_string(k.experts) + " align " + std::to_string(k.align));
    const EpConfig c = config(k.tokens, 1024, k.topk, k.experts, DataType::kBFloat16, EpMode::kHighThroughput, true, k.align);
    EXPECT_EQ(worst_case_recv_rows(c, k.world), k.want);
  }
}

// ---------------------------------------------------------------- derived sizes
TEST(EpArgs, DimsFollowTheConfig) {
  // High-throughput: no slabs; the output holds the worst case unless max_recv_rows says less.
  EpConfig c = config(64, 1024, 4, 16, DataType::kBFloat16, EpMode::kHighThroughput, true, 8);
  ferry::ep::EpDims d = ferry::ep::ep_dims(c, kWorld);
  EXPECT_EQ(d.local_experts, 4);
  EXPECT_EQ(d.capacity_per_expert, 0);
  EXPECT_EQ(d.capacity_rows, worst_case_recv_rows(c, kWorld));
  c.max_recv_rows = 1000;
  EXPECT_EQ(ferry::ep::ep_dims(c, kWorld).capacity_rows, 1000);
  // Low-latency: one slab of world * T rows per local expert.
  d = ferry::ep::ep_dims(config(64, 1024, 4, 48, DataType::kBFloat16, EpMode::kLowLatency), 3);
  EXPECT_EQ(d.local_experts, 16);
  EXPECT_EQ(d.capacity_per_expert, 3 * 64);
  EXPECT_EQ(d.capacity_rows, 16 * 3 * 64);
}

// ---------------------------------------------------------------- dispatch
TEST(EpArgs, ValidDispatchCalls) {
  const EpConfig c = config(kT, kH, kK, 16);
  for (int n : {0, 1, 17, kT}) {
    SCOPED_TRACE("tokens " + std::to_string(n));
    DispatchCall d = dispatch(c, tok(n), idx(n), wts(n));
    EXPECT_EQ(d.num_tokens, n);
    EXPECT_FALSE(d.fp8_input);
    EXPECT_TRUE(d.has_weights);
    EXPECT_FALSE(d.idx_is_int64);
    d = dispatch(c, tok(n), idx(n, DataType::kInt64), wts(n));
    EXPECT_TRUE(d.idx_is_int64);
    EXPECT_EQ(d.num_tokens, n);
  }
  // Explicit contiguous strides are contiguous.
  DispatchCall d = dispatch(c, TensorView(kTok, kBf16, {8, kH}, {kH, 1}), TensorView(kIdx, kI32, {8, kK}, {kK, 1}),
                            TensorView(kW, kF32, {8, kK}, {kK, 1}));
  EXPECT_EQ(d.num_tokens, 8);
  // Without weights.
  const EpConfig nw = config(kT, kH, kK, 16, kBf16, EpMode::kHighThroughput, false);
  d = dispatch(nw, tok(5), idx(5), TensorView());
  EXPECT_FALSE(d.has_weights);
  EXPECT_EQ(d.num_tokens, 5);
  // No tokens, as PyTorch passes them: every tensor has its shape but no pointer.
  d = dispatch(c, TensorView(nullptr, kBf16, {0, kH}), TensorView(nullptr, DataType::kInt64, {0, kK}),
               TensorView(nullptr, kF32, {0, kK}));
  EXPECT_EQ(d.num_tokens, 0);
  EXPECT_TRUE(d.has_weights);
  EXPECT_TRUE(d.idx_is_int64);
  d = dispatch(config(kT, kH, kK, 16, DataType::kFloat8E4M3), TensorView(nullptr, DataType::kFloat8E4M3, {0, kH}),
               TensorView(nullptr, kI32, {0, kK}), TensorView(nullptr, kF32, {0, kK}),
               TensorView(nullptr, kF32, {0, kG}));
  EXPECT_TRUE(d.fp8_input);
  EXPECT_TRUE(d.has_weights);
  // Reusing the latest layout: topk_idx may be omitted (T' from the tokens) or given.
  Dispatched nine(9);
  for (const TensorView& i : {TensorView(), idx(9, DataType::kInt64)}) {
    const DispatchCall reused =
        ferry::ep::validate_dispatch(ctx(c), nine.calls, {tok(9), i, wts(9), TensorView(), &nine.handle});
    EXPECT_EQ(reused.num_tokens, 9);
  }
  // fp8 dispatch: bf16 input (quantized in the kernel) or fp8 input with scales.
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3);
  EXPECT_FALSE(dispatch(f8, tok(12), idx(12), wts(12)).fp8_input);
  d = dispatch(f8, tok(12, DataType::kFloat8E4M3), idx(12), wts(12), scl(12));
  EXPECT_TRUE(d.fp8_input);
  EXPECT_EQ(d.num_tokens, 12);
}

TEST(EpArgs, DispatchRejectsBadTokens) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 16;
  // topk_idx and weights are well formed for `rows` tokens.
  auto bad = [&](const TensorView& t, const char* label, int rows = -1) {
    SCOPED_TRACE(label);
    if (rows < 0) rows = n;
    return rejected([&] { return dispatch(c, t, idx(rows), wts(rows)).num_tokens; }, {"tokens"});
  };
  std::string msg = bad(tok(kT + 1), "more than max_tokens_per_rank", kT + 1);
  EXPECT_TRUE(names_number(msg, kT + 1) && names_number(msg, kT)) << msg;
  EXPECT_TRUE(contains_ci(msg, "max_tokens_per_rank")) << msg;
  msg = bad(tok(n, DataType::kFloat32), "fp32");
  EXPECT_TRUE(contains_ci(msg, "float32")) << msg;
  bad(tok(n, DataType::kFloat16), "fp16");
  bad(tok(n, kI32), "int32");
  msg = bad(TensorView(kTok, kBf16, {n, kH - 128}), "hidden mismatch");
  EXPECT_TRUE(names_number(msg, kH) && names_number(msg, kH - 128)) << msg;
  bad(TensorView(kTok, kBf16, {n, kH + 128}), "hidden mismatch (larger)");
  bad(TensorView(kTok, kBf16, {int64_t{n} * kH}), "1-D");
  bad(TensorView(kTok, kBf16, {1, n, kH}), "3-D");
  msg = bad(TensorView(kTok, kBf16, {n, kH}, {2 * kH, 1}), "row stride");
  EXPECT_TRUE(names_number(msg, 2 * kH) && contains_ci(msg, "contiguous")) << "should name the strides: " << msg;
  bad(TensorView(kTok, kBf16, {n, kH}, {1, n}), "transposed");
  bad(TensorView(kTok, kBf16, {n, kH}, {kH}), "strides of the wrong rank");
  bad(TensorView(nullptr, kBf16, {n, kH}), "null data");
  bad(TensorView(), "empty");
  bad(TensorView(kTok, kBf16, {-1, kH}), "negative size");
  // Rows move in 16-byte units: a view at an odd element offset is refused, one 16 bytes in is fine.
  msg = bad(TensorView(fake(0x100002), kBf16, {n, kH}), "misaligned by 2 bytes");
  EXPECT_TRUE(contains_ci(msg, "16-byte") && names_number(msg, 2)) << msg;
  bad(TensorView(fake(0x100008), kBf16, {n, kH}), "misaligned by 8 bytes");
  EXPECT_NO_THROW(dispatch(c, TensorView(fake(0x100010), kBf16, {n, kH}), idx(n), wts(n)));
  // fp8 tokens on a bf16 dispatch_type.
  msg = rejected([&] { return dispatch(c, tok(n, DataType::kFloat8E4M3), idx(n), wts(n), scl(n)).num_tokens; },
                 {"tokens"});
  EXPECT_TRUE(contains_ci(msg, "dispatch_type")) << msg;
}

TEST(EpArgs, DispatchRejectsBadTopkIdx) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 16;
  auto bad = [&](const TensorView& i, const char* label) {
    SCOPED_TRACE(label);
    return rejected([&] { return dispatch(c, tok(n), i, wts(n)).num_tokens; }, {"topk_idx"});
  };
  bad(idx(n, DataType::kFloat32), "fp32");
  bad(idx(n, kBf16), "bf16");
  bad(idx(n, DataType::kFloat64), "fp64");
  std::string msg = bad(TensorView(kIdx, kI32, {n, kK + 1}), "topk mismatch");
  EXPECT_TRUE(names_number(msg, kK) && names_number(msg, kK + 1)) << msg;
  bad(TensorView(kIdx, kI32, {n, kK - 1}), "topk mismatch (smaller)");
  msg = bad(TensorView(kIdx, kI32, {n - 1, kK}), "rows mismatch");
  EXPECT_TRUE(names_number(msg, n) && names_number(msg, n - 1)) << msg;
  bad(TensorView(kIdx, kI32, {n + 1, kK}), "rows mismatch (larger)");
  bad(TensorView(kIdx, kI32, {int64_t{n} * kK}), "1-D");
  bad(TensorView(kIdx, DataType::kInt64, {n, kK}, {1, n}), "transposed");
  bad(TensorView(kIdx, kI32, {n, kK}, {2 * kK, 1}), "row stride");
  bad(TensorView(), "missing (not reusing)");
  // Given while reusing, it must still be well formed.
  SCOPED_TRACE("reusing");
  Dispatched d(n);
  for (const TensorView& i : {idx(n, DataType::kFloat32), TensorView(kIdx, kI32, {n, kK + 1})})
    rejected([&] { ferry::ep::validate_dispatch(ctx(c), d.calls, {tok(n), i, wts(n), TensorView(), &d.handle}); },
             {"topk_idx"});
}

TEST(EpArgs, DispatchRejectsBadWeights) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 16;
  auto bad = [&](const EpConfig& cfg, const TensorView& w, const char* label) {
    SCOPED_TRACE(label);
    return rejected([&] { return dispatch(cfg, tok(n), idx(n), w).num_tokens; }, {"topk_weights"});
  };
  EXPECT_TRUE(contains_ci(bad(c, TensorView(kW, DataType::kFloat64, {n, kK}), "fp64"), "float64"));
  bad(c, TensorView(kW, kBf16, {n, kK}), "bf16");
  bad(c, TensorView(kW, kF32, {n, kK + 1}), "topk mismatch");
  bad(c, TensorView(kW, kF32, {n - 1, kK}), "rows mismatch");
  bad(c, TensorView(kW, kF32, {int64_t{n} * kK}), "1-D");
  bad(c, TensorView(kW, kF32, {n, kK}, {2 * kK, 1}), "non-contiguous");
  EXPECT_TRUE(contains_ci(bad(c, TensorView(), "missing with with_weights"), "with_weights"));
  const EpConfig nw = config(kT, kH, kK, 16, kBf16, EpMode::kHighThroughput, false);
  EXPECT_TRUE(contains_ci(bad(nw, wts(n), "given without with_weights"), "with_weights"));
}

TEST(EpArgs, DispatchRejectsBadScales) {
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3);
  const int n = 16;
  auto bad = [&](const TensorView& s, const char* label) {
    SCOPED_TRACE(label);
    return rejected([&] { return dispatch(f8, tok(n, DataType::kFloat8E4M3), idx(n), wts(n), s).num_tokens; },
                    {"scales"});
  };
  bad(TensorView(), "fp8 input without scales");
  bad(TensorView(kScales, kBf16, {n, kG}), "bf16 scales");
  const std::string msg = bad(TensorView(kScales, kF32, {n, kH / 64}), "one scale per 64 columns");
  EXPECT_TRUE(names_number(msg, kG) && names_number(msg, kH / 64)) << msg;
  bad(TensorView(kScales, kF32, {n + 1, kG}), "rows mismatch");
  bad(TensorView(kScales, kF32, {int64_t{n} * kG}), "1-D");
  bad(TensorView(kScales, kF32, {n, kG}, {1, n}), "transposed");
  // Scales come only with fp8 tokens.
  SCOPED_TRACE("scales with bf16 tokens");
  rejected([&] { return dispatch(f8, tok(n), idx(n), wts(n), scl(n)).num_tokens; }, {"scales"});
}

// ---------------------------------------------------------------- combine
TEST(EpArgs, CombineHighThroughput) {
  const EpConfig c = config(kT, kH, kK, 16);  // 4 local experts
  const TensorView out(kOut, kBf16, {10, kH});
  const TensorView eo(kExp, kBf16, {100, kH});
  auto check = [&](const TensorView& e, int64_t rows, const TensorView& o, int n = 10) {
    ferry::ep::validate_combine_args(ctx(c), n, rows, e, o);
  };
  EXPECT_NO_THROW(check(eo, 100, out));
  EXPECT_NO_THROW(check(TensorView(kExp, kBf16, {150, kH}), 100, out));
  EXPECT_NO_THROW(check(eo, -1, out));  // rows unknown (no host synchronization)
  EXPECT_NO_THROW(check(eo, 100, TensorView()));  // out: the caller's to make
  EXPECT_NO_THROW(check(eo, 0, TensorView(kOut, kBf16, {0, kH}), 0));

  auto bad_eo = [&](const TensorView& e, const char* label) {
    SCOPED_TRACE(label);
    return rejected([&] { check(e, 100, out); }, {"expert_outputs"});
  };
  const std::string msg = bad_eo(TensorView(kExp, kBf16, {99, kH}), "fewer rows than dispatched");
  EXPECT_TRUE(names_number(msg, 99) && names_number(msg, 100)) << msg;
  bad_eo(TensorView(kExp, kF32, {100, kH}), "fp32");
  bad_eo(TensorView(kExp, DataType::kFloat8E4M3, {100, kH}), "fp8");
  bad_eo(TensorView(kExp, kBf16, {100, kH - 128}), "hidden mismatch");
  bad_eo(TensorView(kExp, kBf16, {100, kH}, {2 * kH, 1}), "non-contiguous");
  bad_eo(TensorView(kExp, kBf16, {int64_t{100} * kH}), "1-D");
  bad_eo(TensorView(), "missing");
  EXPECT_TRUE(contains_ci(bad_eo(TensorView(fake(0x1000004), kBf16, {100, kH}), "misaligned"), "16-byte"));

  auto bad_out = [&](const TensorView& o, const char* label) {
    SCOPED_TRACE(label);
    const std::string m = ferry::testing::error_message<ferry::InvalidArgument>([&] { check(eo, 100, o); });
    EXPECT_TRUE(names_word(m, "out")) << "should name out: " << m;
    return m;
  };
  bad_out(TensorView(kOut, kF32, {10, kH}), "fp32");
  bad_out(TensorView(kOut, DataType::kFloat16, {10, kH}), "fp16");
  EXPECT_TRUE(names_number(bad_out(TensorView(kOut, kBf16, {11, kH}), "rows mismatch"), 11));
  bad_out(TensorView(kOut, kBf16, {9, kH}), "rows mismatch (fewer)");
  bad_out(TensorView(kOut, kBf16, {10, kH + 128}), "hidden mismatch");
  bad_out(TensorView(kOut, kBf16, {int64_t{10} * kH}), "1-D");
  bad_out(TensorView(kOut, kBf16, {10, kH}, {2 * kH, 1}), "non-contiguous");
  bad_out(TensorView(nullptr, kBf16, {10, kH}), "null");
  EXPECT_TRUE(contains_ci(bad_out(TensorView(fake(0x9000006), kBf16, {10, kH}), "misaligned"), "16-byte"));
  EXPECT_NO_THROW(check(eo, 100, TensorView(fake(0x9000010), kBf16, {10, kH})));
}

TEST(EpArgs, CombineLowLatency) {
  const EpConfig c = config(kT, kH, kK, 16, kBf16, EpMode::kLowLatency);
  const int Le = 4;
  const int64_t cap = int64_t{kWorld} * kT;
  const TensorView out(kOut, kBf16, {kT, kH});
  const TensorView eo(kExp, kBf16, {Le, cap, kH});
  EXPECT_NO_THROW(ferry::ep::validate_combine_args(ctx(c), kT, -1, eo, out));
  EXPECT_NO_THROW(ferry::ep::validate_combine_args(ctx(c), kT, -1, eo, TensorView()));
  // fp8 dispatch still combines bf16 expert outputs.
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3, EpMode::kLowLatency);
  EXPECT_NO_THROW(ferry::ep::validate_combine_args(ctx(f8), kT, -1, eo, out));

  auto bad_eo = [&](const TensorView& e, const char* label) {
    SCOPED_TRACE(label);
    return rejected([&] { ferry::ep::validate_combine_args(ctx(c), kT, -1, e, out); }, {"expert_outputs"});
  };
  EXPECT_TRUE(names_number(bad_eo(TensorView(kExp, kBf16, {Le, cap - 1, kH}), "capacity mismatch"), cap));
  EXPECT_TRUE(names_number(bad_eo(TensorView(kExp, kBf16, {Le + 1, cap, kH}), "local experts mismatch"), Le));
  bad_eo(TensorView(kExp, kBf16, {Le - 1, cap, kH}), "local experts mismatch (fewer)");
  bad_eo(TensorView(kExp, kBf16, {Le, cap, kH - 128}), "hidden mismatch");
  bad_eo(TensorView(kExp, kF32, {Le, cap, kH}), "fp32");
  bad_eo(TensorView(kExp, kBf16, {Le, cap, kH}, {cap * kH * 2, kH, 1}), "non-contiguous");
}

}  // namespace
