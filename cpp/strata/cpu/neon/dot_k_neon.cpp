// NEON dots of the 256-value super-block formats (Q2_K, Q4_K, Q6_K, IQ4_XS) with Q8_K activations:
// weights widened to signed int8 lanes, one 16-lane dot per scale group, group scales applied in
// int32, the min terms of Q2_K / Q4_K taken from the activation block sums.
#include "strata/cpu/dot_rows.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/q6_k_bytes_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

inline int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

float dot_q2_k(int64_t nb, const BlockQ2_K* x, const BlockQ8_K* y) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int summs = 0;
    for (int g = 0; g < 16; ++g) summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t qa = vld1q_u8(x[i].qs + 32 * h);
      const uint8x16_t qb = vld1q_u8(x[i].qs + 32 * h + 16);
      const int8_t* q8 = y[i].qs + 128 * h;
      const uint8_t* sc = x[i].scales + 8 * h;
      // Shift s selects elements 32s .. 32s+31 of this half: groups 2s (from qa) and 2s+1 (qb).
      const uint8x16_t a0 = vandq_u8(qa, m3), b0 = vandq_u8(qb, m3);
      const uint8x16_t a1 = vandq_u8(vshrq_n_u8(qa, 2), m3), b1 = vandq_u8(vshrq_n_u8(qb, 2), m3);
      const uint8x16_t a2 = vandq_u8(vshrq_n_u8(qa, 4), m3), b2 = vandq_u8(vshrq_n_u8(qb, 4), m3);
      const uint8x16_t a3 = vshrq_n_u8(qa, 6), b3 = vshrq_n_u8(qb, 6);
      isum += (sc[0] & 0xF) * dot16(as_s8(a0), vld1q_s8(q8 + 0)) + (sc[1] & 0xF) * dot16(as_s8(b0), vld1q_s8(q8 + 16));
      isum += (sc[2] & 0xF) * dot16(as_s8(a1), vld1q_s8(q8 + 32)) + (sc[3] & 0xF) * dot16(as_s8(b1), vld1q_s8(q8 + 48));
      isum += (sc[4] & 0xF) * dot16(as_s8(a2), vld1q_s8(q8 + 64)) + (sc[5] & 0xF) * dot16(as_s8(b2), vld1q_s8(q8 + 80));
      isum +=
          (sc[6] & 0xF) * dot16(as_s8(a3), vld1q_s8(q8 + 96)) + (sc[7] & 0xF) * dot16(as_s8(b3), vld1q_s8(q8 + 112));
    }
    const float dall = y[i].d * half(x[i].d);
    const float dmin = y[i].d * half(x[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float dot_q4_k(int64_t nb, const BlockQ4_K* x, const BlockQ8_K* y) {
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0, summs = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      quant::q4_k_scale_min(2 * j, x[i].scales, sc_lo, m_lo);
      quant::q4_k_scale_min(2 * j + 1, x[i].scales, sc_hi, m_hi);
      summs +=
          m_lo * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) + m_hi * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j);
      const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      const int8_t* q8 = y[i].qs + 64 * j;
      int32x4_t lo = dot_s8(vdupq_n_s32(0), as_s8(vandq_u8(q0, m4)), vld1q_s8(q8));
      lo = dot_s8(lo, as_s8(vandq_u8(q1, m4)), vld1q_s8(q8 + 16));
      int32x4_t hi = dot_s8(vdupq_n_s32(0), as_s8(vshrq_n_u8(q0, 4)), vld1q_s8(q8 + 32));
      hi = dot_s8(hi, as_s8(vshrq_n_u8(q1, 4)), vld1q_s8(q8 + 48));
      isum += sc_lo * vaddvq_s32(lo) + sc_hi * vaddvq_s32(hi);
    }
    const float d = y[i].d * half(x[i].d);
    const float dmin = y[i].d * half(x[i].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const int8_t* q8 = y[i].qs + 128 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      int8x16_t g[8];
      q6k::half_groups(x[i], h, g);
      for (int k = 0; k < 8; ++k) isum += sc[k] * dot16(g[k], vld1q_s8(q8 + 16 * k));
    }
    sum += (y[i].d * half(x[i].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_iq4_xs(int64_t nb, const BlockIQ4_XS* x, const BlockQ8_K* y) {
  const int8x16_t values = vld1q_s8(quant::kIQ4NLValues);
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      const uint8x16_t q = vld1q_u8(x[i].qs + 16 * g);
      const int8_t* q8 = y[i].qs + 32 * g;
      int32x4_t p = dot_s8(vdupq_n_s32(0), vqtbl1q_s8(values, vandq_u8(q, m4)), vld1q_s8(q8));
      p = dot_s8(p, vqtbl1q_s8(values, vshrq_n_u8(q, 4)), vld1q_s8(q8 + 16));
      isum += quant::iq4_xs_scale(x[i], g) * vaddvq_s32(p);
    }
    sum += (y[i].d * half(x[i].d)) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

void dot_rows_q2_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ2_K, dot_q2_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ4_K, dot_q4_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ6_K, dot_q6_k>(n, w, stride, nrows, act, out);
}
void dot_rows_iq4_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ4_XS, dot_iq4_xs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
