// How an EpBuffer splits its SMs between the two halves of dispatch() and
// combine() while they run at once (NOTE [Overlapped halves and free SMs]):
// receive blocks + send blocks = num_sms. One function, chosen once when the
// buffer is built, so the rule lives in one place and is tested on the CPU.
#pragma once

#include "ferry/ep.hpp"

namespace ferry::ep {

// What the split depends on, all known when the buffer is built (across nodes, once its window is).
struct HalvesShape {
  int num_sms;
  int world_size;
  bool low_latency;
  bool rank_rows;
  bool spans_nodes;
  bool hierarchical;
  bool network_writes_device_memory;  // Window::network_writes_device_memory() (across nodes)
};

// The shape of a buffer of `config` on `world_size` ranks inside one node; across nodes the caller sets the
// last three fields.
HalvesShape halves_shape(const EpConfig& config, int world_size);

struct HalvesSplit {
  int dispatch_recv_blocks;
  int combine_recv_blocks;
};

// The built-in split, before the knobs.
HalvesSplit builtin_halves_split(const HalvesShape& shape);

// FERRY_EP_DISPATCH_RECV_BLOCKS / FERRY_EP_COMBINE_RECV_BLOCKS where set, else the built-in split; each
// clamped to 1 .. num_sms - 1 (1 on a single SM, where the halves do not overlap).
HalvesSplit halves_split(const HalvesShape& shape);

}  // namespace ferry::ep
