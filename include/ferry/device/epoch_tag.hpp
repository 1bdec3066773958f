// The 32-bit tag of a call's epoch, for words that carry it beside data (LL lines, tagged counts and boxes).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define FERRY_TAG_HD __host__ __device__ __forceinline__
#else
#define FERRY_TAG_HD constexpr inline
#endif

namespace ferry::device {

// NOTE [Epoch tags]
// A reader takes a word as its call's when the word's 32-bit tag equals the call's, so a tag must differ from
// every tag the word may still hold: 0 (regions start zeroed, and a call may read a word no call wrote before, for
// example the part of a scratch beyond every earlier call's size) and the tags of the calls before it that used the
// same slot (parities: two calls back; single slots: one). The low 32 bits of the epoch fail the first at every
// epoch that is a multiple of 2^32: a word never written then reads as this call's, all zeros. So the tag is
// epoch mod (2^32 - 1), plus 1: never 0, and two epochs share a tag only 2^32 - 1 apart (twice that for the same
// parity). 2^32 = 1 (mod 2^32 - 1), so the modulus folds the two halves: no 64-bit division on the GPU.
FERRY_TAG_HD uint32_t epoch_tag32(uint64_t epoch) {
  const uint64_t folded = (epoch >> 32) + (epoch & 0xffffffffu);        // = epoch (mod 2^32 - 1), < 2^33
  uint64_t rest = (folded >> 32) + (folded & 0xffffffffu);              // < 2^32 + 1
  rest = rest >= 0xffffffffu ? rest - 0xffffffffu : rest;               // in [0, 2^32 - 2]
  return static_cast<uint32_t>(rest) + 1u;
}

// Where the tag sits between the epoch's load and a kernel's first store (the LL AllReduce; session 42 measured
// epoch_tag32 there at 1.6-2.2% of a 3.4-4.9 us call) the counter does the work instead: the launch after `epoch`
// takes epoch_after(epoch), which skips every epoch whose low 32 bits are 0, so the low 32 bits serve as the tag.
// It steps by 3 over such an epoch, so consecutive launches still alternate parity (double-buffered slots), and a
// tag repeats only 2^32 epochs later. Epochs stay increasing, so `flag >= expected` waits are unaffected.
FERRY_TAG_HD uint64_t epoch_after(uint64_t epoch) {
  return static_cast<uint32_t>(epoch + 1) == 0 ? epoch + 3 : epoch + 1;
}

}  // namespace ferry::device

#undef FERRY_TAG_HD
