// NEON dots of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S with Q8_K activations: 16 codebook
// magnitudes per register (two IQ2 entries of 8, or four IQ3 entries of 4; IQ2_S's 10-bit and
// IQ3_S's 9-bit indices formed from qs and qh as the scalar reference forms them), signed with
// byte masks ((g ^ m) − m negates where m = −1: from kIQSignMasks for the 7-bit sign fields, from
// the stored bits themselves for IQ2_S's and IQ3_S's 8 free ones), one 16-lane dot each, the odd
// integer scales applied in int32 and the constant 1/8 (IQ2 formats) or 1/4 (IQ3_XXS) once at the
// end, as the scalar reference does.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kIQ2SGrid;
using quant::kIQ2XSGrid;
using quant::kIQ2XXSGrid;
using quant::kIQ3SGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

// Magnitudes g negated where the byte mask m is −1.
inline int8x16_t with_signs(int8x16_t g, int8x16_t m) { return vsubq_s8(veorq_s8(g, m), m); }

// Magnitudes (lanes 0..7 from lo, 8..15 from hi) with the signs of two 7-bit sign fields.
inline int8x16_t signed_magnitudes(uint64_t lo, uint64_t hi, uint32_t s_lo, uint32_t s_hi) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  const int8x16_t m =
      vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(kIQSignMasks[s_lo]), vcreate_u64(kIQSignMasks[s_hi])));
  return with_signs(g, m);
}

// Magnitudes (lanes 0..7 from lo, 8..15 from hi) with the signs of two stored sign bytes (bit j of
// bits[r] negates lane 8r + j).
inline int8x16_t signed_magnitudes(uint64_t lo, uint64_t hi, const uint8_t* bits) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  const uint8x16_t lane_bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
  const uint8x16_t m = vtstq_u8(vcombine_u8(vld1_dup_u8(bits), vld1_dup_u8(bits + 1)), lane_bit);
  return with_signs(g, vreinterpretq_s8_u8(m));
}

inline uint64_t iq3_pair(uint8_t a, uint8_t b) { return uint64_t{kIQ3XXSGrid[a]} | (uint64_t{kIQ3XXSGrid[b]} << 32); }

// IQ3_S's grid entries k and k + 1 (9-bit indices) as 8 magnitudes.
inline uint64_t iq3_s_pair(const BlockIQ3_S& b, int k) {
  return uint64_t{kIQ3SGrid[quant::iq3_s_index(b, k)]} | (uint64_t{kIQ3SGrid[quant::iq3_s_index(b, k + 1)]} << 32);
}

float dot_iq2_xxs(int64_t nb, const BlockIQ2_XXS* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      uint32_t aux[2];
      std::memcpy(aux, x[i].qs + 4 * g, 8);
      const int8_t* q8 = y[i].qs + 32 * g;
      const int8x16_t w0 = signed_magnitudes(kIQ2XXSGrid[aux[0] & 0xFF], kIQ2XXSGrid[(aux[0] >> 8) & 0xFF],
                                             aux[1] & 127, (aux[1] >> 7) & 127);
      const int8x16_t w1 = signed_magnitudes(kIQ2XXSGrid[(aux[0] >> 16) & 0xFF], kIQ2XXSGrid[aux[0] >> 24],
                                             (aux[1] >> 14) & 127, (aux[1] >> 21) & 127);
      const int32x4_t p = dot_s8(dot_s8(vdupq_n_s32(0), w0, vld1q_s8(q8)), w1, vld1q_s8(q8 + 16));
      isum += static_cast<int>(2 * (aux[1] >> 28) + 1) * vaddvq_s32(p);
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq2_xs(int64_t nb, const BlockIQ2_XS* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 16; ++h) {
      const uint16_t q0 = x[i].qs[2 * h], q1 = x[i].qs[2 * h + 1];
      const int8x16_t w = signed_magnitudes(kIQ2XSGrid[q0 & 511], kIQ2XSGrid[q1 & 511], q0 >> 9, q1 >> 9);
      isum += quant::iq_odd_scale(x[i], h) * dot16(w, vld1q_s8(y[i].qs + 16 * h));
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq2_s(int64_t nb, const BlockIQ2_S* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 16; ++h) {
      const int8x16_t w = signed_magnitudes(kIQ2SGrid[quant::iq2_s_index(x[i], 2 * h)],
                                            kIQ2SGrid[quant::iq2_s_index(x[i], 2 * h + 1)], x[i].signs + 2 * h);
      isum += quant::iq_odd_scale(x[i], h) * dot16(w, vld1q_s8(y[i].qs + 16 * h));
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq3_xxs(int64_t nb, const BlockIQ3_XXS* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      uint32_t aux;
      std::memcpy(&aux, x[i].qs + quant::kQK_K / 4 + 4 * g, 4);
      const uint8_t* q3 = x[i].qs + 8 * g;
      const int8_t* q8 = y[i].qs + 32 * g;
      const int8x16_t w0 =
          signed_magnitudes(iq3_pair(q3[0], q3[1]), iq3_pair(q3[2], q3[3]), aux & 127, (aux >> 7) & 127);
      const int8x16_t w1 =
          signed_magnitudes(iq3_pair(q3[4], q3[5]), iq3_pair(q3[6], q3[7]), (aux >> 14) & 127, (aux >> 21) & 127);
      const int32x4_t p = dot_s8(dot_s8(vdupq_n_s32(0), w0, vld1q_s8(q8)), w1, vld1q_s8(q8 + 16));
      isum += static_cast<int>(2 * (aux >> 28) + 1) * vaddvq_s32(p);
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.25f * sum;
}

float dot_iq3_s(int64_t nb, const BlockIQ3_S* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      const int k = 8 * g;  // the group's first grid entry (4 magnitudes each)
      const uint8_t* signs = x[i].signs + 4 * g;
      const int8_t* q8 = y[i].qs + 32 * g;
      const int8x16_t w0 = signed_magnitudes(iq3_s_pair(x[i], k), iq3_s_pair(x[i], k + 2), signs);
      const int8x16_t w1 = signed_magnitudes(iq3_s_pair(x[i], k + 4), iq3_s_pair(x[i], k + 6), signs + 2);
      const int32x4_t p = dot_s8(dot_s8(vdupq_n_s32(0), w0, vld1q_s8(q8)), w1, vld1q_s8(q8 + 16));
      isum += quant::iq_odd_scale(x[i], g) * vaddvq_s32(p);
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

void dot_rows_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XXS, dot_iq2_xxs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XS, dot_iq2_xs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_S, dot_iq2_s>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_XXS, dot_iq3_xxs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_S, dot_iq3_s>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
