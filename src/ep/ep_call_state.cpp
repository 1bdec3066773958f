// EpBuffer's call-order state (ep_call_state.hpp). The messages are part of the
// API's behaviour (tests/gpu check them).
#include "ep/ep_call_state.hpp"

#include "ferry/error.hpp"

namespace ferry::ep {

void CallState::check_dispatch_send(const char* where, const EpHandle* reuse) const {
  FERRY_ARG_CHECK(stage_ != Stage::kDispatchSent && stage_ != Stage::kCombineSent,
                  where << ": called while a " << (stage_ == Stage::kDispatchSent ? "dispatch" : "combine")
                        << " is half done (call its receive half first)");
  if (reuse != nullptr) {
    FERRY_ARG_CHECK(reuse->generation != 0 && reuse->generation == generation_,
                    where << ": the reused handle is not this buffer's latest layout");
  }
}

void CallState::check_reused_tokens(const char* where, const EpHandle& reuse, int num_tokens) {
  FERRY_ARG_CHECK(num_tokens == reuse.num_tokens,
                  where << ": the reused handle routes " << reuse.num_tokens << " tokens, got " << num_tokens);
}

EpHandle CallState::dispatch_send_done(bool reusing, int num_tokens, bool with_weights) {
  if (!reusing) {
    ++generation_;
    num_tokens_ = num_tokens;
  }
  with_weights_ = with_weights;
  stage_ = Stage::kDispatchSent;
  synced_rows_ = -1;
  return EpHandle{generation_, num_tokens_, with_weights_};
}

void CallState::check_dispatch_recv(const char* where, const EpHandle& handle) const {
  FERRY_ARG_CHECK(stage_ == Stage::kDispatchSent, where << ": no dispatch_send to receive");
  FERRY_ARG_CHECK(handle.generation == generation_, where << ": the handle is not the latest dispatch's");
}

void CallState::check_latest_layout(const char* where, const EpHandle& handle) const {
  FERRY_ARG_CHECK(handle.generation != 0 && handle.generation == generation_,
                  where << ": the handle is not this buffer's latest dispatch (an EpBuffer keeps one layout)");
}

void CallState::check_combine_send(const char* where, const EpHandle& handle) const {
  check_latest_layout(where, handle);
  FERRY_ARG_CHECK(stage_ == Stage::kDispatched,
                  where << ": " << (stage_ == Stage::kCombineSent ? "combine_send called twice"
                                                                 : "no completed dispatch to combine"));
}

void CallState::check_combine_recv(const char* where, const EpHandle& handle) const {
  FERRY_ARG_CHECK(stage_ == Stage::kCombineSent, where << ": no combine_send to receive");
  FERRY_ARG_CHECK(handle.generation == generation_, where << ": the handle is not the latest dispatch's");
}

}  // namespace ferry::ep
