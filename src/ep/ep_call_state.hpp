// Where an EpBuffer's call sequence stands, on the host, and the checks that
// each call fits it (a misuse is an InvalidArgument here, not a device hang).
#pragma once

#include <cstdint>

#include "ferry/ep.hpp"

namespace ferry::ep {

// NOTE [EpBuffer call order]
// One layout lives in the buffer: the latest dispatch's. The host tracks where
// the call sequence stands so a misuse is an error here, not a device hang:
// dispatch_send -> dispatch_recv -> (combine_send -> combine_recv)* and again.
// A new dispatch may follow a dispatch directly (the epochs make staging reuse
// safe, NOTE [EP epochs]). Every rank must make the same calls in the same order.
enum class Stage { kIdle, kDispatchSent, kDispatched, kCombineSent };

// `where` names the public call in messages ("EpBuffer::dispatch", ...). The
// check_* functions throw InvalidArgument and change nothing; the *_done
// functions record a half once it is launched.
class CallState {
 public:
  // dispatch_send, before the tensors are checked: no half-done call, and a
  // reused handle is the latest layout.
  void check_dispatch_send(const char* where, const EpHandle* reuse) const;
  // dispatch_send with a reused handle, once the tokens are counted.
  static void check_reused_tokens(const char* where, const EpHandle& reuse, int num_tokens);
  // A new layout (unless reusing) of num_tokens tokens; returns its handle.
  EpHandle dispatch_send_done(bool reusing, int num_tokens, bool with_weights);

  void check_dispatch_recv(const char* where, const EpHandle& handle) const;
  void dispatch_recv_done() { stage_ = Stage::kDispatched; }
  // High-throughput: the dispatch output's rows, learnt by a host synchronization.
  void set_synced_rows(int64_t rows) { synced_rows_ = rows; }

  // The handle is this buffer's latest dispatch (combine_send, and combine()
  // before its send half).
  void check_latest_layout(const char* where, const EpHandle& handle) const;
  // combine_send: check_latest_layout, then a completed dispatch and no combine half done.
  void check_combine_send(const char* where, const EpHandle& handle) const;
  void combine_send_done() { stage_ = Stage::kCombineSent; }
  void check_combine_recv(const char* where, const EpHandle& handle) const;
  void combine_recv_done() { stage_ = Stage::kDispatched; }

  uint64_t generation() const { return generation_; }
  int num_tokens() const { return num_tokens_; }
  bool with_weights() const { return with_weights_; }
  int64_t synced_rows() const { return synced_rows_; }

 private:
  uint64_t generation_ = 0;  // of the current layout
  int num_tokens_ = 0;       // of the current layout
  bool with_weights_ = false;
  Stage stage_ = Stage::kIdle;
  int64_t synced_rows_ = -1;  // rows of the current dispatch output, when known on the host
};

}  // namespace ferry::ep
