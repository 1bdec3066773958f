// Fixtures of the EP argument-check tests (test_ep_args.cpp, test_ep_calls.cpp):
// fake tensors on fake devices, configs, and expectations on the messages.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <regex>
#include <string>
#include <utility>

#include "common/expect_error.hpp"
#include "ep/ep_call_state.hpp"
#include "ep/ep_args.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "ferry/types.hpp"

namespace ferry::testing::ep_args {

using ferry::DataType;
using ferry::EpConfig;
using ferry::EpHandle;
using ferry::EpMode;
using ferry::TensorView;
using ferry::ep::ArgNames;
using ferry::ep::CallContext;
using ferry::ep::CallState;
using ferry::ep::DeviceRule;
using ferry::ep::DispatchCall;

// Device 0's memory starts at kDevice0, device 1's at kDevice1; the rest is host memory.
constexpr uintptr_t kDevice0 = 0x7f0000000000, kDevice1 = 0x7f1000000000, kSpan = 0x100000000;
inline int fake_device(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a >= kDevice0 && a < kDevice0 + kSpan) return 0;
  if (a >= kDevice1 && a < kDevice1 + kSpan) return 1;
  return -1;
}
inline const void* fake(uintptr_t offset, uintptr_t base = kDevice0) {
  return reinterpret_cast<const void*>(base + offset);
}
inline const void* const kTok = fake(0x100000);
inline const void* const kIdx = fake(0x900000);
inline const void* const kW = fake(0xa00000);
inline const void* const kScales = fake(0xb00000);
inline const void* const kExp = fake(0x1000000);
inline const void* const kOut = fake(0x9000000);
inline const void* const kHost = reinterpret_cast<const void*>(uintptr_t{0x10000});
inline const void* const kOtherGpu = fake(0x100000, kDevice1);

inline EpConfig config(int T = 64, int H = 1024, int K = 4, int E = 16, DataType dt = DataType::kBFloat16,
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

inline const ArgNames kCppNames{};
constexpr int kWorld = 4;

// The checks of a buffer on device 0 of kWorld ranks.
inline CallContext ctx(const EpConfig& c, const ArgNames& names = kCppNames) {
  return CallContext{c, kWorld, DeviceRule{0, fake_device}, names};
}

// `name` appears in the message as a whole word ("out" is not matched by "expert_outputs").
inline bool names_word(const std::string& what, const std::string& name) {
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

constexpr int kT = 64, kH = 1024, kK = 4, kG = kH / 128;
constexpr DataType kBf16 = DataType::kBFloat16, kF32 = DataType::kFloat32, kI32 = DataType::kInt32;

inline TensorView tok(int n, DataType t = kBf16) { return TensorView(kTok, t, {n, kH}); }
inline TensorView idx(int n, DataType t = kI32) { return TensorView(kIdx, t, {n, kK}); }
inline TensorView wts(int n) { return TensorView(kW, kF32, {n, kK}); }
inline TensorView scl(int n) { return TensorView(kScales, kF32, {n, kG}); }

// A dispatch on a buffer with no call in progress.
inline DispatchCall dispatch(const EpConfig& c, const TensorView& t, const TensorView& i, const TensorView& w,
                             const TensorView& s = TensorView(), const ArgNames& names = kCppNames) {
  return ferry::ep::validate_dispatch_args(ctx(c, names), {t, i, w, s});
}

// A buffer's call state after a complete dispatch of `n` tokens, and its handle.
struct Dispatched {
  CallState calls;
  EpHandle handle;
  explicit Dispatched(int n) : handle(calls.dispatch_send_done(false, n, true)) { calls.dispatch_recv_done(); }
};

}  // namespace ferry::testing::ep_args
