// NEON dots of Q3_K and Q5_K with Q8_K activations: weights rebuilt as int8 lanes (Q3_K's 2 low
// bits and high bit as q − 4·!hbit, Q5_K's nibble and fifth bit), one 16-lane dot per scale group
// (two per 32-value group for Q5_K), group scales applied in int32, Q5_K's mins taken from the
// activation block sums.
#include "strata/cpu/dot_rows.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockQ3_K;
using quant::BlockQ5_K;
using quant::BlockQ8_K;

inline int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }
// v >> k per byte for a run-time k (NEON shifts right by a negative left shift).
inline uint8x16_t shr(uint8x16_t v, int k) { return vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-k))); }

float dot_q3_k(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* y) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  const uint8x16_t m1 = vdupq_n_u8(1);
  const int8x16_t m4 = vdupq_n_s8(4);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8x16_t ha = vld1q_u8(x[i].hmask), hb = vld1q_u8(x[i].hmask + 16);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t qa = vld1q_u8(x[i].qs + 32 * h), qb = vld1q_u8(x[i].qs + 32 * h + 16);
      const int8_t* q8 = y[i].qs + 128 * h;
      for (int s = 0; s < 4; ++s) {
        const int bit = 4 * h + s;
        // (q2 | hbit << 2) − 4 = q2 − 4·!hbit
        const uint8x16_t ua = vorrq_u8(vandq_u8(shr(qa, 2 * s), m3), vshlq_n_u8(vandq_u8(shr(ha, bit), m1), 2));
        const uint8x16_t ub = vorrq_u8(vandq_u8(shr(qb, 2 * s), m3), vshlq_n_u8(vandq_u8(shr(hb, bit), m1), 2));
        const int pa = dot16(vsubq_s8(as_s8(ua), m4), vld1q_s8(q8 + 32 * s));
        const int pb = dot16(vsubq_s8(as_s8(ub), m4), vld1q_s8(q8 + 32 * s + 16));
        isum +=
            quant::q3_k_scale(x[i].scales, 8 * h + 2 * s) * pa + quant::q3_k_scale(x[i].scales, 8 * h + 2 * s + 1) * pb;
      }
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q5_k(int64_t nb, const BlockQ5_K* x, const BlockQ8_K* y) {
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  const uint8x16_t m1 = vdupq_n_u8(1);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
    int isum = 0, summs = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      quant::q4_k_scale_min(2 * j, x[i].scales, sc_lo, m_lo);
      quant::q4_k_scale_min(2 * j + 1, x[i].scales, sc_hi, m_hi);
      summs +=
          m_lo * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) + m_hi * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      const uint8x16_t f0l = vshlq_n_u8(vandq_u8(shr(h0, 2 * j), m1), 4),
                       f1l = vshlq_n_u8(vandq_u8(shr(h1, 2 * j), m1), 4);
      const uint8x16_t f0h = vshlq_n_u8(vandq_u8(shr(h0, 2 * j + 1), m1), 4),
                       f1h = vshlq_n_u8(vandq_u8(shr(h1, 2 * j + 1), m1), 4);
      const int8_t* q8 = y[i].qs + 64 * j;
      int32x4_t lo = dot_s8(vdupq_n_s32(0), as_s8(vorrq_u8(vandq_u8(q0, m4), f0l)), vld1q_s8(q8));
      lo = dot_s8(lo, as_s8(vorrq_u8(vandq_u8(q1, m4), f1l)), vld1q_s8(q8 + 16));
      int32x4_t hi = dot_s8(vdupq_n_s32(0), as_s8(vorrq_u8(vshrq_n_u8(q0, 4), f0h)), vld1q_s8(q8 + 32));
      hi = dot_s8(hi, as_s8(vorrq_u8(vshrq_n_u8(q1, 4), f1h)), vld1q_s8(q8 + 48));
      isum += sc_lo * vaddvq_s32(lo) + sc_hi * vaddvq_s32(hi);
    }
    const float d = y[i].d * half(x[i].d);
    const float dmin = y[i].d * half(x[i].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

}  // namespace

void dot_rows_q3_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ3_K, dot_q3_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ5_K, dot_q5_k>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
