// The EP checks of each call beyond its tensors' form (src/ep/ep_args.hpp,
// ep_call_state.hpp), no GPU: where the tensors live, the order of the halves,
// which handles a buffer accepts, and the names messages use (the C++ API's, or
// the Python layer's through its binding). Every rejection is an InvalidArgument
// naming the argument and the value.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "ep/ep_call_state.hpp"
#include "ep/ep_args.hpp"
#include "ferry/ep.hpp"
#include "ferry/error.hpp"
#include "unit/ep_args_fixtures.hpp"

namespace {

using namespace ferry::testing::ep_args;
using ferry::testing::contains_ci;
using ferry::testing::names_number;
using ferry::testing::user_part;

// ---------------------------------------------------------------- where the tensors live
TEST(EpCalls, TensorsMustBeOnTheBuffersDevice) {
  const EpConfig c = config(kT, kH, kK, 16), f8 = config(kT, kH, kK, 16, DataType::kFloat8E4M3);
  const int n = 8;
  for (const void* p : {kHost, kOtherGpu}) {
    const bool host = p == kHost;
    SCOPED_TRACE(host ? "host memory" : "another GPU");
    auto bad = [&](auto&& fn, const char* name) {
      const std::string msg = rejected(fn, {name});
      EXPECT_TRUE(contains_ci(user_part(msg), "device 0")) << "should name the buffer's device: " << msg;
      EXPECT_TRUE(contains_ci(user_part(msg), host ? "host memory" : "device 1")) << "should say where it is: " << msg;
    };
    bad([&] { return dispatch(c, TensorView(p, kBf16, {n, kH}), idx(n), wts(n)).num_tokens; }, "tokens");
    bad([&] { return dispatch(c, tok(n), TensorView(p, kI32, {n, kK}), wts(n)).num_tokens; }, "topk_idx");
    bad([&] { return dispatch(c, tok(n), idx(n), TensorView(p, kF32, {n, kK})).num_tokens; }, "topk_weights");
    const TensorView fp8_tokens = tok(n, DataType::kFloat8E4M3);
    bad([&] { return dispatch(f8, fp8_tokens, idx(n), wts(n), TensorView(p, kF32, {n, kG})).num_tokens; }, "scales");
    Dispatched d(n);
    bad([&] { ferry::ep::validate_combine_send(ctx(c), d.calls, d.handle, TensorView(p, kBf16, {n * kK, kH})); },
        "expert_outputs");
    d.calls.combine_send_done();
    bad([&] { ferry::ep::validate_combine_recv(ctx(c), d.calls, d.handle, TensorView(p, kBf16, {n, kH})); }, "out");
  }
  // Nothing to check: no elements; the ignored topk_idx of a reused layout; no device rule.
  EXPECT_NO_THROW(dispatch(c, TensorView(kHost, kBf16, {0, kH}), TensorView(kHost, kI32, {0, kK}),
                           TensorView(kHost, kF32, {0, kK})));
  Dispatched d(n);
  const TensorView host_idx(kHost, kI32, {n, kK});
  EXPECT_NO_THROW(ferry::ep::validate_dispatch(ctx(c), d.calls, {tok(n), host_idx, wts(n), TensorView(), &d.handle}));
  const CallContext unchecked{c, kWorld, DeviceRule{-1, fake_device}, kCppNames};
  EXPECT_NO_THROW(ferry::ep::validate_dispatch_args(
      unchecked, {TensorView(kHost, kBf16, {n, kH}), TensorView(kHost, kI32, {n, kK}), wts(n), TensorView()}));
}

// ---------------------------------------------------------------- route (the layout ahead)
// EpBuffer::route's checks (the topk_idx it takes, named as route's), and what it does
// to the call state: a new layout whose handle a dispatch may reuse; the previous
// dispatch's handle turns stale; refused while a send half waits for its receive half.
TEST(EpCalls, RouteChecksAndReplacesTheLayout) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 8;
  Dispatched d(n);
  auto route = [&](const TensorView& i) { return ferry::ep::validate_route(ctx(c), d.calls, i); };
  for (auto [bad, name] : {std::pair{TensorView(kIdx, DataType::kFloat32, {n, kK}), "int32 or int64"},
                           std::pair{TensorView(kIdx, kI32, {n, kK + 1}), "topk_idx"},
                           std::pair{TensorView(kIdx, kI32, {kT + 1, kK}), "max_tokens_per_rank"},
                           std::pair{TensorView(), "missing"},
                           std::pair{TensorView(kHost, kI32, {n, kK}), "device 0"}}) {
    const std::string msg = rejected([&] { return route(bad).num_tokens; }, {name});
    EXPECT_TRUE(contains_ci(user_part(msg), "EpBuffer::route")) << msg;
  }
  const auto call = route(TensorView(kIdx, DataType::kInt64, {n - 1, kK}));
  EXPECT_EQ(call.num_tokens, n - 1);
  EXPECT_TRUE(call.idx_is_int64);
  const EpHandle routed = d.calls.route_done(call.num_tokens);
  EXPECT_NE(routed.generation, d.handle.generation);
  EXPECT_EQ(routed.num_tokens, n - 1);
  // The previous dispatch cannot be combined any more; a dispatch reusing route's handle can start.
  rejected(
      [&] { ferry::ep::validate_combine_send(ctx(c), d.calls, d.handle, TensorView(kIdx, kBf16, {n * kK, kH})); },
      {"older"});
  auto dispatch = [&](int tokens) {
    const ferry::ep::DispatchArgs args{tok(tokens), TensorView(), wts(tokens), TensorView(), &routed};
    return ferry::ep::validate_dispatch(ctx(c), d.calls, args);
  };
  EXPECT_NO_THROW(dispatch(n - 1));
  rejected([&] { return dispatch(n).num_tokens; }, {"reused handle"});
  // Between a send half and its receive half: refused, naming route.
  const EpHandle sent = d.calls.dispatch_send_done(true, n - 1, true);
  EXPECT_EQ(sent.generation, routed.generation);
  const std::string half = rejected([&] { return route(idx(n)).num_tokens; }, {"half done"});
  EXPECT_TRUE(contains_ci(user_part(half), "EpBuffer::route")) << half;
}

// ---------------------------------------------------------------- call order and handles
// The checks take the call state read-only: a rejected call leaves the buffer
// where it was, and the right call is accepted next.
TEST(EpCalls, HalvesMustComeInOrder) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 8;
  const TensorView t = tok(n), i = idx(n), w = wts(n), none, eo(kExp, kBf16, {n * kK, kH}), out(kOut, kBf16, {n, kH});
  CallState calls;
  auto send = [&] { return ferry::ep::validate_dispatch(ctx(c), calls, {t, i, w, none}).num_tokens; };
  auto recv = [&](const EpHandle& h) { ferry::ep::validate_dispatch_recv(ctx(c), calls, h); };
  auto combine_send = [&](const EpHandle& h) { ferry::ep::validate_combine_send(ctx(c), calls, h, eo); };
  auto combine_recv = [&](const EpHandle& h) { ferry::ep::validate_combine_recv(ctx(c), calls, h, out); };

  rejected([&] { recv(EpHandle{}); }, {"no dispatch_send"});
  rejected([&] { combine_recv(EpHandle{}); }, {"no combine_send"});
  EXPECT_EQ(send(), n);
  const EpHandle h = calls.dispatch_send_done(false, n, true);  // what EpBuffer records once the half is launched
  rejected(send, {"half done"});
  rejected([&] { combine_send(h); }, {"no completed dispatch"});
  rejected([&] { combine_recv(h); }, {"no combine_send"});
  rejected([&] { ferry::ep::validate_combine(ctx(c), calls, h, eo, out); }, {"no completed dispatch"});
  EXPECT_NO_THROW(recv(h));
  calls.dispatch_recv_done();
  rejected([&] { recv(h); }, {"no dispatch_send"});
  // combine(): both halves' checks before its send half.
  EXPECT_NO_THROW(ferry::ep::validate_combine(ctx(c), calls, h, eo, out));
  rejected([&] { ferry::ep::validate_combine(ctx(c), calls, h, eo, TensorView(kOut, kBf16, {n + 1, kH})); }, {"out"});
  rejected([&] { ferry::ep::validate_combine(ctx(c), calls, h, TensorView(), out); }, {"expert_outputs"});
  EXPECT_NO_THROW(combine_send(h));
  calls.combine_send_done();
  rejected([&] { combine_send(h); }, {"twice"});
  rejected(send, {"half done"});
  EXPECT_NO_THROW(combine_recv(h));
  calls.combine_recv_done();
  // Combine the same layout again, or dispatch anew.
  EXPECT_NO_THROW(combine_send(h));
  EXPECT_EQ(send(), n);
}

TEST(EpCalls, HandleMustBeThisBuffersLatest) {
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 8;
  const TensorView eo(kExp, kBf16, {n * kK, kH});
  Dispatched mine(n), other(n);  // two buffers, each after its first dispatch
  ASSERT_EQ(mine.handle.num_tokens, other.handle.num_tokens);
  ASSERT_NE(mine.handle.generation, other.handle.generation);
  const EpHandle first = mine.handle;
  mine.calls.dispatch_send_done(false, n, true);  // a second dispatch: `first` is stale
  mine.calls.dispatch_recv_done();
  const EpHandle latest{mine.calls.generation(), n, true};

  auto combine = [&](const EpHandle& h) { ferry::ep::validate_combine_send(ctx(c), mine.calls, h, eo); };
  auto reuse = [&](const EpHandle& h) {
    const TensorView none;
    return ferry::ep::validate_dispatch(ctx(c), mine.calls, {tok(n), none, wts(n), none, &h}).num_tokens;
  };
  for (const auto& [h, what] : {std::pair{EpHandle{}, "empty"}, std::pair{other.handle, "another EpBuffer"},
                                std::pair{first, "older dispatch"}}) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(contains_ci(rejected([&] { combine(h); }, {"handle"}), what));
    EXPECT_TRUE(contains_ci(rejected([&] { reuse(h); }, {"reused handle"}), what));
  }
  const std::string msg = rejected([&] { combine(first); }, {"handle"});
  EXPECT_TRUE(names_number(msg, 1) && names_number(msg, 2)) << "should name both dispatches: " << msg;
  EXPECT_NO_THROW(combine(latest));
  EXPECT_EQ(reuse(latest), n);
  // A reused layout routes as many tokens as its dispatch had.
  const TensorView none;
  const std::string count = rejected(
      [&] { return ferry::ep::validate_dispatch(ctx(c), mine.calls, {tok(n + 1), none, wts(n + 1), none, &latest}); },
      {"reused handle"});
  EXPECT_TRUE(names_number(count, n) && names_number(count, n + 1)) << count;
}

// ---------------------------------------------------------------- names in messages
TEST(EpCalls, MessagesUseTheCallersNames) {
  ArgNames py;  // what the Python binding passes (python/csrc/ops.cpp)
  py.dispatch = "EpLayer.dispatch";
  py.combine = py.combine_recv = "EpLayer.combine";
  py.tokens = "input";
  py.topk_idx = "exp_indices";
  py.topk_weights = "weight";
  py.expert_outputs = "expert_output";
  py.handle = "layout";
  py.max_tokens = "max_tokens";
  py.owner = "EpLayer";
  const EpConfig c = config(kT, kH, kK, 16);
  const int n = 8;
  auto named = [](const std::string& msg, const char* word, const char* not_word) {
    EXPECT_TRUE(names_word(msg, word) && !contains_ci(user_part(msg), not_word))
        << word << ", not " << not_word << ": " << msg;
  };
  named(rejected([&] { return dispatch(c, tok(kT + 1), idx(kT + 1), wts(kT + 1), {}, py).num_tokens; }, {"input"}),
        "max_tokens", "max_tokens_per_rank");
  named(rejected([&] { return dispatch(c, tok(n), idx(n, kF32), wts(n), {}, py).num_tokens; }, {"EpLayer.dispatch"}),
        "exp_indices", "topk_idx");
  named(rejected([&] { return dispatch(c, tok(n), idx(n), TensorView(kW, kBf16, {n, kK}), {}, py).num_tokens; },
                 {"EpLayer.dispatch"}), "weight", "topk_weights");
  Dispatched d(n), other(n);
  const TensorView fp32_outputs(kExp, kF32, {n, kH});
  named(rejected([&] { ferry::ep::validate_combine_send(ctx(c, py), d.calls, d.handle, fp32_outputs); },
                 {"EpLayer.combine"}), "expert_output", "expert_outputs");
  named(rejected([&] { ferry::ep::validate_combine_send(ctx(c, py), d.calls, other.handle, TensorView()); },
                 {"another EpLayer"}), "layout", "EpBuffer");

  // The binding sets them for the calls it makes into an EpBuffer.
  EXPECT_STREQ(ferry::ep::arg_names().tokens, "tokens");
  {
    const ferry::ep::ScopedArgNames scope(py);
    EXPECT_STREQ(ferry::ep::arg_names().tokens, "input");
    {
      const ferry::ep::ScopedArgNames inner(kCppNames);
      EXPECT_STREQ(ferry::ep::arg_names().tokens, "tokens");
    }
    EXPECT_STREQ(ferry::ep::arg_names().tokens, "input");
    const CallContext current{c, kWorld, ferry::ep::DeviceRule{-1, nullptr}, ferry::ep::arg_names()};
    rejected([&] {
      ferry::ep::validate_combine_args(current, n, n, TensorView(kExp, kBf16, {n, kH}), TensorView(kOut, kF32, {n, kH}));
    }, {"EpLayer.combine"});
  }
  EXPECT_STREQ(ferry::ep::arg_names().tokens, "tokens");
}

}  // namespace
