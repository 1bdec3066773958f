// ferry-bench ep --check: the number helpers of ep_check.cpp that the rank-rows
// check (ep_check_rank_rows.cpp) uses too.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ep_check.hpp"
#include "ferry/cuda_check.hpp"

namespace ferry::bench::ep_detail {

uint16_t bf16_bits(float value);
float bf16_value(uint16_t bits);
float fp8_value(uint8_t bits);
// Token t of rank `src`: multiples of 1/64 in [-1.98, 1.98], exact in bf16.
void token_row(uint64_t seed, int src, int t, int hidden, uint16_t* row);
// Largest |x| of the 128 bf16 values of one fp8 scale block.
float block_amax(const uint16_t* block);

// Row j of received rows (bf16, or fp8 with `scales`) against the source token x:
// bf16 bit for bit, fp8 within its rounding. got[h] = each received value. On the
// first bad column records it (prefixed by `where`) and returns false.
bool check_row(DataType type, const uint8_t* rows, const float* scales, int64_t j, size_t hidden, const uint16_t* x,
               float* got, CheckRecord& record, const std::string& where);

// Stand-in expert: expert e multiplies its rows by 2^(e % 4 - 1), exact in bf16, and
// different for neighbouring experts so a row combined under the wrong expert shows.
inline float expert_scale(int64_t e) { return std::ldexp(1.0f, static_cast<int>(e % 4) - 1); }

// fp8 error allowed per element: half an e4m3 step (2^-4 relative) with margin, and
// the subnormal step of the block's scale.
inline float fp8_tolerance(float x, float block_amax) { return std::fabs(x) / 8 + block_amax * 0x1.0p-16f + 1e-6f; }

}  // namespace ferry::bench::ep_detail
