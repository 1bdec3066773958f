// The rank-rows dispatch's own-row rules (send_roles.hpp).
#include "ep/send_roles.hpp"

#include <algorithm>

namespace ferry::ep {

// NOTE [EP rank rows by role] (rank_rows_dispatch.cu): the send blocks that write only
// this rank's own rows, or 0 (every block writes every destination). NVLink stores
// saturate from about kNvlinkBlocks SMs (2 H200s: 320 GB/s from 8 SMs, 325 from 24),
// and one SM copies about 43 GB/s locally, so at W = 2 (as many own bytes as peer
// bytes) 8 own-row blocks keep pace with the peer group; with more peers a token's
// own share shrinks, about 1 / (W - 1). Split only where the peer group keeps
// kNvlinkBlocks: with fewer SMs, mixed blocks are faster (measured at W = 2, 24 SMs:
// own-row blocks 0 / 4 / 6 / 7 / 8 / 10 / 12: bf16 228.6 / 341.2 / 239.6 / 211.0 /
// 209.7 / 214.4 / 221.9 us; 16 SMs split 10 + 5: 284.5 against 221 mixed).
// Quantizing, never split: each group then reads and quantizes every bf16 token, and the
// own-row group (sized for a copy) becomes the whole call's path, whatever the SM count
// (2 H100s, T=4096, H=7168, top-8, fp8 from bf16: 8 own-row blocks 220.0 / 220.8 us at
// 24 / 48 SMs, mixed 139.9 / 128.6; 12 of 24 own-row 166.1, 24 of 48 139.6;
// docs/results/session33_2xH100/c4).
int rank_rows_local_blocks(int send_blocks, int world_size, bool quantizes, std::optional<int64_t> chosen) {
  constexpr int kNvlinkBlocks = 8;
  if (send_blocks < 2 || world_size < 2) return 0;
  if (chosen) return static_cast<int>(std::min<int64_t>(*chosen, send_blocks - 1));
  if (quantizes) return 0;
  const int local = (kNvlinkBlocks + world_size - 2) / (world_size - 1);  // ceil(8 / (W - 1))
  return send_blocks - local >= kNvlinkBlocks ? local : 0;
}

// NOTE [EP own rows first]: the copy engine's share of the own rows (percent). On 2 H100s (T=4096,
// H=7168, top-8; session 18, c2-c3) it won with 7 and 8 send blocks (bf16 dispatch 368 -> 284 and
// 334 -> 269 us) and lost from 11 (12 SMs: 258 against 252; 24: 261 against 216), whatever its share
// (50-80%) or its pieces (1-4 streams): while it copies, the SMs' NVLink stores slow down about as
// long as the copy takes. Session 19 (c1, 9-12 SMs, so 8-11 send blocks beside one receive block):
// bf16 334 -> 266, 303 -> 261, 273 -> 260, 253 -> 261 us; fp8 200 -> 169, 185 -> 165, 167 -> 150,
// 156 -> 157. So up to 10 send blocks.
int own_rows_copy_percent(int send_blocks, std::optional<int64_t> chosen) {
  constexpr int kCopyEngineMaxSendBlocks = 10;
  if (chosen) return static_cast<int>(*chosen);
  return send_blocks <= kCopyEngineMaxSendBlocks ? 100 : 0;
}


}  // namespace ferry::ep
