// Test data of the proxy tests: the byte pattern of each put and the put sizes.
#pragma once

#include <cstdint>

#include "net/host_net.hpp"

namespace ferry::testing {

using net::HostNet;

// The byte at `position` of the put number `iteration` from `sender` to `receiver`.
inline uint8_t pattern(int sender, int receiver, uint64_t iteration, uint64_t position) {
  uint64_t x = (static_cast<uint64_t>(sender) << 56) ^ (static_cast<uint64_t>(receiver) << 48) ^ (iteration << 24) ^
               position;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint8_t>(x);
}

// splitmix64: the sizes of the puts, reproducible by the receiver.
inline uint64_t mix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ferry::testing
