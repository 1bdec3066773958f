// The SM split between an EpBuffer's overlapped halves (halves_split.hpp).
#include "ep/halves_split.hpp"

#include <algorithm>

#include "common/knobs.hpp"

namespace ferry::ep {

HalvesShape halves_shape(const EpConfig& config, int world_size) {
  return {config.num_sms, world_size, config.mode == EpMode::kLowLatency, config.layout == EpLayout::kRankRows,
          false, false, false};
}

HalvesSplit builtin_halves_split(const HalvesShape& s) {
  // NOTE [EP across nodes: halves' split]
  // Across nodes the halves are the pack and the placement or the sum. Where the network writes this rank's
  // landing in GPU memory (cuda_ipc here, GPUDirect RDMA on a cluster) both are bound by HBM as inside a node,
  // and they keep the split below (2x H100 as 2 virtual nodes over cuda_ipc, 24 SMs, session 29 c5, 2 rounds:
  // combine 0.795, dispatch bf16 / fp8 0.851 / 0.932 of half and half's time; for more than 2 ranks the 1/3
  // below is not measured across nodes). Elsewhere half each: over UCX shared memory (landings in host memory,
  // both halves bound by PCIe) that split read combine 1.040, dispatch 0.987 / 1.021. The hierarchical path
  // takes half each too: not measured otherwise.
  if (s.spans_nodes && (s.hierarchical || !s.network_writes_device_memory))
    return {s.num_sms / 2, s.num_sms / 2};
  // Measured on 4xH200 (T=4096, H=7168, 24 SMs): dispatch is bound by the
  // receive half (it writes every expert row), combine by the send half (it
  // reads every expert row), so each gets the larger share there.
  // Rank rows: the send half only copies rows to their homes, the receive half
  // reads two or more rows per token and writes one: it gets half. Expanded
  // high-throughput: 1/3 (4xH200); on 2 ranks the send half reads every
  // expert row of the one peer and the receive half sums only two partials per
  // token: 1/4 (2xH200, 24 SMs, receive blocks 3/4/5/6/8/10: 733/571/557/547/596/665 us).
  const int combine_share = s.low_latency || s.rank_rows ? 2 : (s.world_size == 2 ? 4 : 3);
  return {s.num_sms * 2 / 3, s.num_sms / combine_share};
}

HalvesSplit halves_split(const HalvesShape& s) {
  const HalvesSplit builtin = builtin_halves_split(s);
  const int most = std::max(1, s.num_sms - 1);
  return {std::clamp(static_cast<int>(knobs::kEpDispatchRecvBlocks.read_or(builtin.dispatch_recv_blocks)), 1, most),
          std::clamp(static_cast<int>(knobs::kEpCombineRecvBlocks.read_or(builtin.combine_recv_blocks)), 1, most)};
}

}  // namespace ferry::ep
