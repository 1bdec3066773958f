// Where an EpBuffer's call sequence stands, on the host, and the checks that
// each call fits it (a misuse is an InvalidArgument here, not a device hang).
// ep_args.cpp runs these checks as part of each call's validation.
#pragma once

#include <cstdint>

#include "ep/ep_args.hpp"
#include "ferry/ep.hpp"

namespace ferry::ep {

// NOTE [EpBuffer call order]
// One layout lives in the buffer: the latest dispatch's. The host tracks where
// the call sequence stands so a misuse is an error here, not a device hang:
// dispatch_send -> dispatch_recv -> (combine_send -> combine_recv)* and again.
// A new dispatch may follow a dispatch directly (the epochs make staging reuse
// safe, NOTE [EP epochs]). Every rank must make the same calls in the same order.
enum class Stage { kIdle, kDispatchSent, kDispatched, kCombineSent };

// NOTE [EP handle owner]: a handle's generation carries its buffer's id in the
// high 32 bits (ids are unique in the process), so a handle of another buffer is
// told apart from a stale one of this buffer.
//
// The check_* functions throw InvalidArgument, naming the call `where` and the
// arguments by `names`, and change nothing; the *_done functions record a half
// once it is launched.
class CallState {
 public:
  CallState();

  // dispatch_send, before the tensors are checked: no half-done call, and a
  // reused handle is the latest layout.
  void check_dispatch_send(const ArgNames& names, const EpHandle* reuse) const;
  // No send half waiting for its receive half (`where` names the call).
  void check_not_half_done(const char* where) const;
  // dispatch_send with a reused handle, once the tokens are counted.
  static void check_reused_tokens(const ArgNames& names, const EpHandle& reuse, int num_tokens);
  // A new layout (unless reusing) of num_tokens tokens; returns its handle.
  EpHandle dispatch_send_done(bool reusing, int num_tokens, bool with_weights);
  // EpBuffer::route: a new layout of num_tokens tokens and no dispatch yet (the
  // previous dispatch cannot be combined any more); returns its handle.
  EpHandle route_done(int num_tokens);

  void check_dispatch_recv(const ArgNames& names, const EpHandle& handle) const;
  void dispatch_recv_done() { stage_ = Stage::kDispatched; }
  // High-throughput: the dispatch output's rows, learnt by a host synchronization.
  void set_synced_rows(int64_t rows) { synced_rows_ = rows; }

  // `handle` (called `what` in messages) is this buffer's latest dispatch: not a
  // default handle, another buffer's (`owner` names the kind) or an older one.
  void check_handle(const char* where, const char* what, const char* owner, const EpHandle& handle) const;
  // combine_send: the latest handle, then a completed dispatch and no combine half done.
  void check_combine_send(const ArgNames& names, const EpHandle& handle) const;
  void combine_send_done() { stage_ = Stage::kCombineSent; }
  void check_combine_recv(const ArgNames& names, const EpHandle& handle) const;
  void combine_recv_done() { stage_ = Stage::kDispatched; }

  uint64_t generation() const { return generation_; }
  int num_tokens() const { return num_tokens_; }
  bool with_weights() const { return with_weights_; }
  int64_t synced_rows() const { return synced_rows_; }

 private:
  void new_layout(int num_tokens);  // the next generation, of num_tokens tokens
  uint64_t owner_;       // this buffer's id, shifted into the high bits (NOTE [EP handle owner])
  uint64_t generation_;  // of the current layout; owner_ alone: none yet
  int num_tokens_ = 0;   // of the current layout
  bool with_weights_ = false;
  Stage stage_ = Stage::kIdle;
  int64_t synced_rows_ = -1;  // rows of the current dispatch output, when known on the host
};

}  // namespace ferry::ep
