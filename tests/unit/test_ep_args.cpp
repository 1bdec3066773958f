// EP argument checks at the API boundary (src/ep/validate.hpp) and TensorView,
// no GPU: every rejection is an InvalidArgument whose message names the argument
// (and, where it is a plain number, the value it got); valid configs and calls
// pass and report what they found. Pointers are fake device addresses: the checks
// must not dereference them.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "ep/validate.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace {

using ferry::DataType;
using ferry::EpConfig;
using ferry::EpMode;
using ferry::TensorView;
using ferry::ep::DispatchCall;
using ferry::ep::validate_combine;
using ferry::ep::validate_config;
using ferry::ep::validate_dispatch;
using ferry::ep::worst_case_recv_rows;
using ferry::testing::contains_ci;
using ferry::testing::names_number;
using ferry::testing::user_part;

const void* fake(uintptr_t offset) { return reinterpret_cast<const void*>(uintptr_t{0x7f0000000000} + offset); }
const void* const kTok = fake(0x100000);
const void* const kIdx = fake(0x900000);
const void* const kW = fake(0xa00000);
const void* const kScales = fake(0xb00000);
const void* const kExp = fake(0x1000000);
const void* const kOut = fake(0x9000000);

EpConfig config(int T = 64, int H = 1024, int K = 4, int E = 16, DataType dt = DataType::kBFloat16,
                EpMode mode = EpMode::kHighThroughput, bool weights = true, int align = 1) {
  EpConfig c;
  c.max_tokens_per_rank = T;
  c.hidden = H;
  c.topk = K;
  c.num_experts = E;
  c.dispatch_type = dt;
  c.mode = mode;
  c.with_weights = weights;
  c.expert_alignment = align;
  return c;
}

// `name` appears in the message as a whole word ("out" is not matched by "expert_outputs").
bool names_word(const std::string& what, const std::string& name) {
  const std::regex re("(^|[^A-Za-z0-9_])" + name + "([^A-Za-z0-9_]|$)", std::regex::icase);
  return std::regex_search(user_part(what), re);
}

// Expects InvalidArgument from fn whose message contains one of `names`.
template <typename Fn>
std::string rejected(Fn&& fn, std::initializer_list<const char*> names) {
  const std::string msg = ferry::testing::error_message<ferry::InvalidArgument>(std::forward<Fn>(fn));
  bool named = false;
  for (const char* n : names) named = named || contains_ci(user_part(msg), n);
  std::string list;
  for (const char* n : names) list += std::string(list.empty() ? "" : " or ") + n;
  EXPECT_TRUE(named) << "message should name " << list << ": " << msg;
  return msg;
}

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

// ---------------------------------------------------------------- dispatch
constexpr int kT = 64, kH = 1024, kK = 4, kG = kH / 128;

TensorView tok(int n, DataType t = DataType::kBFloat16) { return TensorView(kTok, t, {n, kH}); }
TensorView idx(int n, DataType t = DataType::kInt32) { return TensorView(kIdx, t, {n, kK}); }
TensorView wts(int n) { return TensorView(kW, DataType::kFloat32, {n, kK}); }
TensorView scl(int n) { return TensorView(kScales, DataType::kFloat32, {n, kG}); }

TEST(EpArgs, ValidDispatchCalls) {
  const EpConfig c = config(kT, kH, kK, 16);
  for (int n : {0, 1, 17, kT}) {
    SCOPED_TRACE("tokens " + std::to_string(n));
    DispatchCall d = validate_dispatch(c, tok(n), idx(n), wts(n), TensorView(), false);
    EXPECT_EQ(d.num_tokens, n);
    EXPECT_FALSE(d.fp8_input);
    EXPECT_TRUE(d.has_weights);
    EXPECT_FALSE(d.idx_is_int64);
    d = validate_dispatch(c, tok(n), idx(n, DataType::kInt64), wts(n), TensorView(), false);
    EXPECT_TRUE(d.idx_is_int64);
    EXPECT_EQ(d.num_tokens, n);
  }
  // Explicit contiguous strides are contiguous.
  DispatchCall d = validate_dispatch(c, TensorView(kTok, DataType::kBFloat16, {8, kH}, {kH, 1}),
                                     TensorView(kIdx, DataType::kInt32, {8, kK}, {kK, 1}),
                                     TensorView(kW, DataType::kFloat32, {8, kK}, {kK, 1}), TensorView(), false);
  EXPECT_EQ(d.num_tokens, 8);
  // Without weights.
  const EpConfig nw = config(kT, kH, kK, 16, DataType::kBFloat16, EpMode::kHighThroughput, false);
  d = validate_dispatch(nw, tok(5), idx(5), TensorView(), TensorView(), false);
  EXPECT_FALSE(d.has_weights);
  EXPECT_EQ(d.num_tokens, 5);
  // No tokens, as PyTorch passes them: every tensor has its shape but no pointer.
  d = validate_dispatch(c, TensorView(nullptr, DataType::kBFloat16, {0, kH}),
                        TensorView(nullptr, DataType::kInt64, {0, kK}),
                        TensorView(nullptr, DataType::kFloat32, {0, kK}), TensorView(), false);
  EXPECT_EQ(d.num_tokens, 0);
  EXPECT_TRUE(d.has_weights);
  EXPECT_TRUE(d.idx_is_int64);
  d = validate_dispatch(config(kT, kH, kK, 16, DataType::kFloat8E4M3), TensorView(nullptr, DataType::kFloat8E4M3, {0, kH}),
                        TensorView(nullptr, DataType::kInt32, {0, kK}), TensorView(nullptr, DataType::kFloat32, {0, kK}),
                        TensorView(nullptr, DataType::kFloat32, {0, kG}), false);
  EXPECT_TRUE(d.fp8_input);
  EXPECT_TRUE(d.has_weights);
  // Reusing a layout: topk_idx may be omitted (T' from the tokens) or given.
  d = validate_dispatch(c, tok(9), TensorView(), wts(9), TensorView(), true);
  EXPECT_EQ(d.num_tokens, 9);
  d = validate_dispatch(c, tok(9), idx(9, DataType::kInt64), wts(9), TensorView(), true);
  EXPECT_EQ(d.num_tokens, 9);
  // fp8 dispatch: bf16 input (quantized in the kernel) or fp8 input with scales.
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3);
  d = validate_dispatch(f8, tok(12), idx(12), wts(12), TensorView(), false);
  EXPECT_FALSE(d.fp8_input);
  d = validate_dispatch(f8, tok(12, DataType::kFloat8E4M3), idx(12), wts(12), scl(12), false);
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
    return rejected([&] { return validate_dispatch(c, t, idx(rows), wts(rows), TensorView(), false).num_tokens; },
                    {"tokens"});
  };
  std::string msg = bad(tok(kT + 1), "more than max_tokens_per_rank", kT + 1);
  EXPECT_TRUE(names_number(msg, kT + 1) || names_number(msg, kT)) << msg;
  bad(tok(n, DataType::kFloat32), "fp32");
  bad(tok(n, DataType::kFloat16), "fp16");
  bad(tok(n, DataType::kInt32), "int32");
  bad(TensorView(kTok, DataType::kBFloat16, {n, kH - 128}), "hidden mismatch");
  bad(TensorView(kTok, DataType::kBFloat16, {n, kH + 128}), "hidden mismatch (larger)");
  bad(TensorView(kTok, DataType::kBFloat16, {int64_t{n} * kH}), "1-D");
  bad(TensorView(kTok, DataType::kBFloat16, {1, n, kH}), "3-D");
  bad(TensorView(kTok, DataType::kBFloat16, {n, kH}, {2 * kH, 1}), "row stride");
  bad(TensorView(kTok, DataType::kBFloat16, {n, kH}, {1, n}), "transposed");
  bad(TensorView(kTok, DataType::kBFloat16, {n, kH}, {kH}), "strides of the wrong rank");
  bad(TensorView(nullptr, DataType::kBFloat16, {n, kH}), "null data");
  bad(TensorView(), "empty");
  // fp8 tokens on a bf16 dispatch_type.
  rejected([&] { return validate_dispatch(c, tok(n, DataType::kFloat8E4M3), idx(n), wts(n), scl(n), false).num_tokens; },
           {"tokens", "dispatch_type", "float8"});
}

TEST(EpArgs, DispatchRejectsBadTopkIdx) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 16;
  auto bad = [&](const TensorView& i, const char* label, std::initializer_list<const char*> names = {"topk_idx"}) {
    SCOPED_TRACE(label);
    rejected([&] { return validate_dispatch(c, tok(n), i, wts(n), TensorView(), false).num_tokens; }, names);
  };
  bad(idx(n, DataType::kFloat32), "fp32");
  bad(idx(n, DataType::kBFloat16), "bf16");
  bad(idx(n, DataType::kFloat64), "fp64");
  bad(TensorView(kIdx, DataType::kInt32, {n, kK + 1}), "topk mismatch", {"topk"});
  bad(TensorView(kIdx, DataType::kInt32, {n, kK - 1}), "topk mismatch (smaller)", {"topk"});
  bad(TensorView(kIdx, DataType::kInt32, {n - 1, kK}), "rows mismatch", {"topk_idx", "tokens"});
  bad(TensorView(kIdx, DataType::kInt32, {n + 1, kK}), "rows mismatch (larger)", {"topk_idx", "tokens"});
  bad(TensorView(kIdx, DataType::kInt32, {int64_t{n} * kK}), "1-D");
  bad(TensorView(kIdx, DataType::kInt64, {n, kK}, {1, n}), "transposed");
  bad(TensorView(kIdx, DataType::kInt32, {n, kK}, {2 * kK, 1}), "row stride");
  bad(TensorView(), "missing (not reusing)");
  // Given while reusing, it must still be well formed.
  SCOPED_TRACE("reusing");
  rejected([&] { return validate_dispatch(c, tok(n), idx(n, DataType::kFloat32), wts(n), TensorView(), true).num_tokens; },
           {"topk_idx"});
  rejected([&] {
    return validate_dispatch(c, tok(n), TensorView(kIdx, DataType::kInt32, {n, kK + 1}), wts(n), TensorView(), true).num_tokens;
  }, {"topk"});
}

TEST(EpArgs, DispatchRejectsBadWeights) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 16;
  auto bad = [&](const EpConfig& cfg, const TensorView& w, const char* label) {
    SCOPED_TRACE(label);
    rejected([&] { return validate_dispatch(cfg, tok(n), idx(n), w, TensorView(), false).num_tokens; }, {"weights"});
  };
  bad(c, TensorView(kW, DataType::kFloat64, {n, kK}), "fp64");
  bad(c, TensorView(kW, DataType::kBFloat16, {n, kK}), "bf16");
  bad(c, TensorView(kW, DataType::kFloat32, {n, kK + 1}), "topk mismatch");
  bad(c, TensorView(kW, DataType::kFloat32, {n - 1, kK}), "rows mismatch");
  bad(c, TensorView(kW, DataType::kFloat32, {int64_t{n} * kK}), "1-D");
  bad(c, TensorView(kW, DataType::kFloat32, {n, kK}, {2 * kK, 1}), "non-contiguous");
  bad(c, TensorView(), "missing with with_weights");
  const EpConfig nw = config(kT, kH, kK, 16, DataType::kBFloat16, EpMode::kHighThroughput, false);
  bad(nw, wts(n), "given without with_weights");
}

TEST(EpArgs, DispatchRejectsBadScales) {
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3);
  const int n = 16;
  auto bad = [&](const TensorView& s, const char* label) {
    SCOPED_TRACE(label);
    rejected([&] { return validate_dispatch(f8, tok(n, DataType::kFloat8E4M3), idx(n), wts(n), s, false).num_tokens; },
             {"scales"});
  };
  bad(TensorView(), "fp8 input without scales");
  bad(TensorView(kScales, DataType::kBFloat16, {n, kG}), "bf16 scales");
  bad(TensorView(kScales, DataType::kFloat32, {n, kH / 64}), "one scale per 64 columns");
  bad(TensorView(kScales, DataType::kFloat32, {n + 1, kG}), "rows mismatch");
  bad(TensorView(kScales, DataType::kFloat32, {int64_t{n} * kG}), "1-D");
  bad(TensorView(kScales, DataType::kFloat32, {n, kG}, {1, n}), "transposed");
  // Scales come only with fp8 tokens.
  SCOPED_TRACE("scales with bf16 tokens");
  rejected([&] { return validate_dispatch(f8, tok(n), idx(n), wts(n), scl(n), false).num_tokens; }, {"scales"});
}

// ---------------------------------------------------------------- combine
TEST(EpArgs, CombineHighThroughput) {
  const int world = 4;
  const EpConfig c = config(kT, kH, kK, 16);  // 4 local experts
  const TensorView out(kOut, DataType::kBFloat16, {10, kH});
  const TensorView eo(kExp, DataType::kBFloat16, {100, kH});
  EXPECT_NO_THROW(validate_combine(c, world, eo, 100, out, 10));
  EXPECT_NO_THROW(validate_combine(c, world, TensorView(kExp, DataType::kBFloat16, {150, kH}), 100, out, 10));
  EXPECT_NO_THROW(validate_combine(c, world, eo, 100, TensorView(), 10));  // the send half
  EXPECT_NO_THROW(validate_combine(c, world, eo, 0, TensorView(kOut, DataType::kBFloat16, {0, kH}), 0));

  auto bad_eo = [&](const TensorView& e, const char* label) {
    SCOPED_TRACE(label);
    rejected([&] { validate_combine(c, world, e, 100, out, 10); }, {"expert_outputs"});
  };
  bad_eo(TensorView(kExp, DataType::kBFloat16, {99, kH}), "fewer rows than dispatched");
  bad_eo(TensorView(kExp, DataType::kFloat32, {100, kH}), "fp32");
  bad_eo(TensorView(kExp, DataType::kFloat8E4M3, {100, kH}), "fp8");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {100, kH - 128}), "hidden mismatch");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {100, kH}, {2 * kH, 1}), "non-contiguous");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {int64_t{100} * kH}), "1-D");

  auto bad_out = [&](const TensorView& o, const char* label) {
    SCOPED_TRACE(label);
    const std::string msg = ferry::testing::error_message<ferry::InvalidArgument>([&] { validate_combine(c, world, eo, 100, o, 10); });
    EXPECT_TRUE(names_word(msg, "out")) << "should name out: " << msg;
  };
  bad_out(TensorView(kOut, DataType::kFloat32, {10, kH}), "fp32");
  bad_out(TensorView(kOut, DataType::kFloat16, {10, kH}), "fp16");
  bad_out(TensorView(kOut, DataType::kBFloat16, {11, kH}), "rows mismatch");
  bad_out(TensorView(kOut, DataType::kBFloat16, {9, kH}), "rows mismatch (fewer)");
  bad_out(TensorView(kOut, DataType::kBFloat16, {10, kH + 128}), "hidden mismatch");
  bad_out(TensorView(kOut, DataType::kBFloat16, {int64_t{10} * kH}), "1-D");
  bad_out(TensorView(kOut, DataType::kBFloat16, {10, kH}, {2 * kH, 1}), "non-contiguous");
}

TEST(EpArgs, CombineLowLatency) {
  const int world = 4;
  const EpConfig c = config(kT, kH, kK, 16, DataType::kBFloat16, EpMode::kLowLatency);
  const int Le = 4;
  const int64_t cap = int64_t{world} * kT;
  const TensorView out(kOut, DataType::kBFloat16, {kT, kH});
  const TensorView eo(kExp, DataType::kBFloat16, {Le, cap, kH});
  EXPECT_NO_THROW(validate_combine(c, world, eo, Le * cap, out, kT));
  EXPECT_NO_THROW(validate_combine(c, world, eo, Le * cap, TensorView(), kT));
  // fp8 dispatch still combines bf16 expert outputs.
  const EpConfig f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3, EpMode::kLowLatency);
  EXPECT_NO_THROW(validate_combine(f8, world, eo, Le * cap, out, kT));

  auto bad_eo = [&](const TensorView& e, const char* label) {
    SCOPED_TRACE(label);
    rejected([&] { validate_combine(c, world, e, Le * cap, out, kT); }, {"expert_outputs"});
  };
  bad_eo(TensorView(kExp, DataType::kBFloat16, {Le, cap - 1, kH}), "capacity mismatch");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {Le + 1, cap, kH}), "local experts mismatch");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {Le - 1, cap, kH}), "local experts mismatch (fewer)");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {Le, cap, kH - 128}), "hidden mismatch");
  bad_eo(TensorView(kExp, DataType::kFloat32, {Le, cap, kH}), "fp32");
  bad_eo(TensorView(kExp, DataType::kBFloat16, {Le, cap, kH}, {cap * kH * 2, kH, 1}), "non-contiguous");
}

}  // namespace
