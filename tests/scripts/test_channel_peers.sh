#!/usr/bin/env bash
# NOTE [Channel peers] (include/ferry/device/channel.cuh): kernel code reaches peers only through the
# channel layer's types and functions (NodeRegion::at, NodeFlags, node_ptr, direct_ptr, recv_ptr, put...),
# never by indexing a table of peer pointers itself. Fails, naming the lines, where device code in src/,
# bench/, tests/ or examples/ indexes DeviceWindow's tables or includes the old NVLink header.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root" || exit 2
hits="$(grep -rnE '\b(nvl_peer|nvl_peer_signals|map_peer)\[|ferry/device/nvlink\.cuh' \
  --include='*.cu' --include='*.cuh' src bench tests examples include | grep -v '^include/ferry/device/channel.cuh:')"
if [ -n "$hits" ]; then
  echo "device code indexes a peer table outside the channel layer (NOTE [Channel peers]):"
  echo "$hits"
  exit 1
fi
[ -f include/ferry/device/channel.cuh ] || { echo "include/ferry/device/channel.cuh is missing"; exit 1; }
echo "channel peers: every kernel reaches peers through include/ferry/device/channel.cuh"
