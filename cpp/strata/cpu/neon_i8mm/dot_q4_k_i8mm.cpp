// SMMLA dots of Q4_K with Q8_K activations (cpu/neon_i8mm/, built with +i8mm): per 32-value group
// four SMMLA give the 2 rows × 2 activations tile of exact group sums, scaled in int32 by each
// row's 6-bit group scale; the mins come from the activation block sums in int32; then per
// super-block acc = fma(float(sum), d_a·d_w, acc) and acc = fms(float(mins), d_a·dmin_w, acc).
// Every lane's arithmetic is its own (tile_rows.h), so several activations in any grouping give
// bitwise the same numbers. One activation runs SDOT per row instead (a tile would waste half its
// multiplies on the activation repeated: 337 against 204 instructions per block under qemu) with
// the same integers and the same two fused steps per super-block, so it too is bitwise the tile's.
#include <arm_neon.h>

#include <cmath>

#include "strata/cpu/neon_i8mm/dot_i8mm.h"
#include "strata/cpu/neon_i8mm/tile_rows.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::neon_i8mm {
namespace {

using quant::BlockQ4_K;
using quant::BlockQ8_K;

inline int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// One 32-value group of two weight rows (u0/u1: row A elements 0..15 / 16..31, v0/v1: row B)
// against one of two activations (p, q: 32 bytes each): the 2×2 tile of exact sums.
inline int32x4_t group_tile(int8x16_t u0, int8x16_t u1, int8x16_t v0, int8x16_t v1, const int8_t* p, const int8_t* q) {
  const int8x16_t p0 = vld1q_s8(p), p1 = vld1q_s8(p + 16), q0 = vld1q_s8(q), q1 = vld1q_s8(q + 16);
  int32x4_t t = vmmlaq_s32(vdupq_n_s32(0), zip_lo(u0, v0), zip_lo(p0, q0));
  t = vmmlaq_s32(t, zip_hi(u0, v0), zip_hi(p0, q0));
  t = vmmlaq_s32(t, zip_lo(u1, v1), zip_lo(p1, q1));
  return vmmlaq_s32(t, zip_hi(u1, v1), zip_hi(p1, q1));
}

struct Q4KTiles {
  using Block = BlockQ4_K;
  using Act = BlockQ8_K;
  static constexpr int64_t kBlockValues = quant::kQK_K;

  template <int RP, int AP>
  static void tiles(int64_t nb, const Block* const* x, const BlockQ8_K* const* y, float32x4_t (&acc)[RP][AP]) {
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    for (int p = 0; p < RP; ++p)
      for (int q = 0; q < AP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      for (int p = 0; p < RP; ++p) {
        const BlockQ4_K& xa = x[2 * p][b];
        const BlockQ4_K& xb = x[2 * p + 1][b];
        uint8_t sca[8], ma[8], scb[8], mb[8];
        for (int g = 0; g < 8; ++g) {
          quant::q4_k_scale_min(g, xa.scales, sca[g], ma[g]);
          quant::q4_k_scale_min(g, xb.scales, scb[g], mb[g]);
        }
        int32x4_t isum[AP];
        for (int q = 0; q < AP; ++q) isum[q] = vdupq_n_s32(0);
        for (int j = 0; j < 4; ++j) {
          const uint8x16_t a0 = vld1q_u8(xa.qs + 32 * j), a1 = vld1q_u8(xa.qs + 32 * j + 16);
          const uint8x16_t b0 = vld1q_u8(xb.qs + 32 * j), b1 = vld1q_u8(xb.qs + 32 * j + 16);
          const int8x16_t al0 = as_s8(vandq_u8(a0, m4)), al1 = as_s8(vandq_u8(a1, m4));
          const int8x16_t bl0 = as_s8(vandq_u8(b0, m4)), bl1 = as_s8(vandq_u8(b1, m4));
          const int8x16_t ah0 = as_s8(vshrq_n_u8(a0, 4)), ah1 = as_s8(vshrq_n_u8(a1, 4));
          const int8x16_t bh0 = as_s8(vshrq_n_u8(b0, 4)), bh1 = as_s8(vshrq_n_u8(b1, 4));
          const int32x4_t sc_lo = {sca[2 * j], sca[2 * j], scb[2 * j], scb[2 * j]};
          const int32x4_t sc_hi = {sca[2 * j + 1], sca[2 * j + 1], scb[2 * j + 1], scb[2 * j + 1]};
          for (int q = 0; q < AP; ++q) {
            const int8_t* y0 = y[2 * q][b].qs + 64 * j;
            const int8_t* y1 = y[2 * q + 1][b].qs + 64 * j;
            isum[q] = vmlaq_s32(isum[q], group_tile(al0, al1, bl0, bl1, y0, y1), sc_lo);
            isum[q] = vmlaq_s32(isum[q], group_tile(ah0, ah1, bh0, bh1, y0 + 32, y1 + 32), sc_hi);
          }
        }
        const float32x4_t dw = halves(xa.d, xa.d, xb.d, xb.d);
        const float32x4_t dmw = halves(xa.dmin, xa.dmin, xb.dmin, xb.dmin);
        for (int q = 0; q < AP; ++q) {
          const BlockQ8_K& y0 = y[2 * q][b];
          const BlockQ8_K& y1 = y[2 * q + 1][b];
          int32_t mins[4] = {0, 0, 0, 0};
          for (int g = 0; g < 8; ++g) {
            const int s0 = y0.bsums[2 * g] + y0.bsums[2 * g + 1], s1 = y1.bsums[2 * g] + y1.bsums[2 * g + 1];
            mins[0] += ma[g] * s0;
            mins[1] += ma[g] * s1;
            mins[2] += mb[g] * s0;
            mins[3] += mb[g] * s1;
          }
          const float ds[4] = {y0.d, y1.d, y0.d, y1.d};
          const float32x4_t da = vld1q_f32(ds);
          acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(isum[q]), vmulq_f32(da, dw));
          acc[p][q] = vfmsq_f32(acc[p][q], vcvtq_f32_s32(vld1q_s32(mins)), vmulq_f32(da, dmw));
        }
      }
    }
  }
};

// One row against one activation: the tile lane's integers (SDOT) and float steps.
float dot_q4_k_row(int64_t nb, const BlockQ4_K* x, const BlockQ8_K* y) {
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0, mins = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      quant::q4_k_scale_min(2 * j, x[i].scales, sc_lo, m_lo);
      quant::q4_k_scale_min(2 * j + 1, x[i].scales, sc_hi, m_hi);
      mins +=
          m_lo * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) + m_hi * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      const int8_t* q8 = y[i].qs + 64 * j;
      int32x4_t lo = vdotq_s32(vdupq_n_s32(0), as_s8(vandq_u8(q0, m4)), vld1q_s8(q8));
      lo = vdotq_s32(lo, as_s8(vandq_u8(q1, m4)), vld1q_s8(q8 + 16));
      int32x4_t hi = vdotq_s32(vdupq_n_s32(0), as_s8(vshrq_n_u8(q0, 4)), vld1q_s8(q8 + 32));
      hi = vdotq_s32(hi, as_s8(vshrq_n_u8(q1, 4)), vld1q_s8(q8 + 48));
      isum += sc_lo * vaddvq_s32(lo) + sc_hi * vaddvq_s32(hi);
    }
    acc = std::fma(static_cast<float>(isum), y[i].d * half(x[i].d), acc);
    acc = std::fma(-static_cast<float>(mins), y[i].d * half(x[i].dmin), acc);
  }
  return acc;
}

}  // namespace

void dot_rows_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  for (int64_t r = 0; r < nrows; ++r)
    out[r] =
        dot_q4_k_row(n / quant::kQK_K, reinterpret_cast<const BlockQ4_K*>(p + static_cast<std::size_t>(r) * stride), y);
}
void dot_rows_multi_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q4KTiles>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::neon_i8mm
