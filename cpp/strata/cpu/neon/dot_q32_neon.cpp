// NEON dots of the 32-value block formats (Q4_0, Q5_0, Q5_1, Q8_0, IQ4_NL) with Q8_0 activations:
// two 16-lane int8 dots per block, f32 accumulation in two interleaved vector accumulators. Q5_1
// (x = d·q + m) adds its min's part m·dy·Σy per block, Σy by pairwise widening adds.
#include <type_traits>

#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/q32_bytes_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using q32::IQ4_NLBytes;
using q32::Q4_0Bytes;
using q32::Q5_0Bytes;
using q32::Q5_1Bytes;
using q32::Q8_0Bytes;
using quant::BlockIQ4_NL;
using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ8_0;

template <typename Block, typename Bytes>
inline float32x4_t block_dot(const Block& x, const BlockQ8_0& y, float32x4_t acc) {
  int8x16_t lo, hi;
  Bytes::get(x, lo, hi);
  const int8x16_t y0 = vld1q_s8(y.qs), y1 = vld1q_s8(y.qs + 16);
  const int32x4_t p = dot_s8(dot_s8(vdupq_n_s32(0), lo, y0), hi, y1);
  acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), half(x.d) * half(y.d));
  if constexpr (std::is_same_v<Block, BlockQ5_1>) {
    const int32x4_t sy = vpaddlq_s16(vpadalq_s8(vpaddlq_s8(y0), y1));  // Σy in four lanes, exact
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(sy), half(x.m) * half(y.d));
  }
  return acc;
}

template <typename Block, typename Bytes>
float dot_row(int64_t nb, const Block* x, const BlockQ8_0* y) {
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    acc0 = block_dot<Block, Bytes>(x[i], y[i], acc0);
    acc1 = block_dot<Block, Bytes>(x[i + 1], y[i + 1], acc1);
  }
  if (i < nb) acc0 = block_dot<Block, Bytes>(x[i], y[i], acc0);
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

template <typename Block, typename Bytes>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot_row<Block, Bytes>(nb, reinterpret_cast<const Block*>(p + static_cast<std::size_t>(r) * stride), y);
}

}  // namespace

void dot_rows_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ4_0, Q4_0Bytes>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ5_0, Q5_0Bytes>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_1(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ5_1, Q5_1Bytes>(n, w, stride, nrows, act, out);
}
void dot_rows_iq4_nl(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockIQ4_NL, IQ4_NLBytes>(n, w, stride, nrows, act, out);
}
void dot_rows_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ8_0, Q8_0Bytes>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
