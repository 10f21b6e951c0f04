// NEON dots of IQ2_XS and IQ3_XXS with Q8_K activations: 16 codebook magnitudes per register
// (two IQ2_XS entries of 8, or four IQ3_XXS entries of 4), signed with the kIQSignMasks byte masks
// ((g ^ m) − m negates where m = −1), one 16-lane dot each, the odd integer scales applied in int32
// and the constant 1/8 or 1/4 once at the end, as the scalar reference does.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ2_XS;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kIQ2XSGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

// Magnitudes (lanes 0..7 from lo, 8..15 from hi) with the signs of two 7-bit sign fields.
inline int8x16_t signed_magnitudes(uint64_t lo, uint64_t hi, uint32_t s_lo, uint32_t s_hi) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  const int8x16_t m =
      vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(kIQSignMasks[s_lo]), vcreate_u64(kIQSignMasks[s_hi])));
  return vsubq_s8(veorq_s8(g, m), m);
}

inline uint64_t iq3_pair(uint8_t a, uint8_t b) { return uint64_t{kIQ3XXSGrid[a]} | (uint64_t{kIQ3XXSGrid[b]} << 32); }

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

}  // namespace

void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XS, dot_iq2_xs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_XXS, dot_iq3_xxs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
