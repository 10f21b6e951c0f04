#pragma once
// The int8 K/V cell format of the strata architecture (docs/gguf.md §2): a head vector of Dh
// floats is split into blocks of 64 contiguous elements (the last one shorter when Dh % 64 != 0);
// each block has an fp16 scale s16 = fp16(absmax / 127) and values
// q = clamp(round_half_even(x / s), -127, 127) with s = float(s16) (q = 0 when s = 0).
// Readers use q * s.
#include <cstdint>

#include "strata/engine/vec_dot.h"

namespace strata::engine {

inline constexpr int kKvBlock = 64;
inline constexpr int kv_blocks(int dh) { return (dh + kKvBlock - 1) / kKvBlock; }

// Quantizes x[0..n) into q[0..n) and scales[0..kv_blocks(n)).
void kv_quantize(const float* x, int n, int8_t* q, uint16_t* scales);
// x[i] = q[i] * s(block of i).
void kv_dequantize(const int8_t* q, const uint16_t* scales, int n, float* x);

// Σ_b s_b · Σ_{i in b} a[i]·q[i]  (block sums by vec_dot's fixed order, then blocks in order).
float kv_dot(const VecKernels& k, const float* a, const int8_t* q, const uint16_t* scales, int n);
// out[i] += (w · s_b) · q[i]
void kv_axpy(const VecKernels& k, float w, const int8_t* q, const uint16_t* scales, int n, float* out);
// Most query heads one attention call takes together (attend_group, engine/attention_kernels.h).
inline constexpr int kMaxHeadGroup = 16;

}  // namespace strata::engine
