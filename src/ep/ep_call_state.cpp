// EpBuffer's call-order state (ep_call_state.hpp). The messages are part of the
// API's behaviour (tests/gpu check them).
#include "ep/ep_call_state.hpp"

#include <atomic>

#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

constexpr uint64_t kCountMask = 0xffffffffull;  // the dispatch count; above it, the owner

uint64_t next_owner() {
  static std::atomic<uint32_t> next{1};
  uint32_t id = next.fetch_add(1, std::memory_order_relaxed);
  if (id == 0) id = next.fetch_add(1, std::memory_order_relaxed);  // 0 is no owner: a default handle
  return uint64_t{id} << 32;
}

}  // namespace

CallState::CallState() : owner_(next_owner()), generation_(owner_) {}

void CallState::check_not_half_done(const char* where) const {
  FERRY_ARG_CHECK(stage_ != Stage::kDispatchSent && stage_ != Stage::kCombineSent,
                  where << ": called while a " << (stage_ == Stage::kDispatchSent ? "dispatch" : "combine")
                        << " is half done (call its receive half first)");
}

void CallState::check_dispatch_send(const ArgNames& names, const EpHandle* reuse) const {
  check_not_half_done(names.dispatch);
  if (reuse != nullptr) check_handle(names.dispatch, "the reused handle", names.owner, *reuse);
}

void CallState::check_reused_tokens(const ArgNames& names, const EpHandle& reuse, int num_tokens) {
  FERRY_ARG_CHECK(num_tokens == reuse.num_tokens, names.dispatch << ": the reused handle routes " << reuse.num_tokens
                                                                 << " tokens, got " << num_tokens << " "
                                                                 << names.tokens);
}

void CallState::new_layout(int num_tokens) {
  const uint64_t count = ((generation_ & kCountMask) + 1) & kCountMask;
  generation_ = owner_ | (count == 0 ? 1 : count);
  num_tokens_ = num_tokens;
}

EpHandle CallState::dispatch_send_done(bool reusing, int num_tokens, bool with_weights) {
  if (!reusing) new_layout(num_tokens);
  with_weights_ = with_weights;
  stage_ = Stage::kDispatchSent;
  synced_rows_ = -1;
  return EpHandle{generation_, num_tokens_, with_weights_};
}

EpHandle CallState::route_done(int num_tokens) {
  new_layout(num_tokens);
  with_weights_ = false;  // set by the dispatch that reuses it
  stage_ = Stage::kIdle;
  synced_rows_ = -1;
  return EpHandle{generation_, num_tokens_, with_weights_};
}

void CallState::check_handle(const char* where, const char* what, const char* owner, const EpHandle& handle) const {
  FERRY_ARG_CHECK(handle.generation != 0, where << ": " << what << " is empty (no dispatch returned it)");
  FERRY_ARG_CHECK((handle.generation & ~kCountMask) == owner_,
                  where << ": " << what << " is from another " << owner << " (it works only on the " << owner
                        << " whose dispatch returned it)");
  FERRY_ARG_CHECK(handle.generation == generation_,
                  where << ": " << what << " is from an older dispatch (dispatch " << (handle.generation & kCountMask)
                        << " of this " << owner << ", the latest is " << (generation_ & kCountMask) << "); an "
                        << owner << " keeps only its latest layout");
}

void CallState::check_dispatch_recv(const ArgNames& names, const EpHandle& handle) const {
  FERRY_ARG_CHECK(stage_ == Stage::kDispatchSent, names.dispatch_recv << ": no dispatch_send to receive");
  check_handle(names.dispatch_recv, names.handle, names.owner, handle);
}

void CallState::check_combine_send(const ArgNames& names, const EpHandle& handle) const {
  check_handle(names.combine, names.handle, names.owner, handle);
  FERRY_ARG_CHECK(stage_ == Stage::kDispatched,
                  names.combine << ": "
                                << (stage_ == Stage::kCombineSent
                                        ? "combine_send called twice (call combine_recv first)"
                                        : "no completed dispatch to combine"));
}

void CallState::check_combine_recv(const ArgNames& names, const EpHandle& handle) const {
  FERRY_ARG_CHECK(stage_ == Stage::kCombineSent, names.combine_recv << ": no combine_send to receive");
  check_handle(names.combine_recv, names.handle, names.owner, handle);
}

}  // namespace ferry::ep
