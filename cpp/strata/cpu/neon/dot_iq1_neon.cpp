// NEON dots of IQ1_S and IQ1_M with Q8_K activations: two grid entries (8 values −1, 0, +1 each)
// per 16-lane register. IQ1_S: one 32-lane dot Σ g·q8 per group, its delta term ±Σq8 from the
// activation's bsums, 8·Σ g·q8 ± Σq8 times the odd scale in int32. IQ1_M (a delta sign per run of
// 8): the lanes become 8·g ± 1 (|.| ≤ 9), so one 16-lane dot per half forms 8·Σ g·q8 ± Σq8 at once.
// The delta's 1/8 is applied once at the end: the same integer sums as the scalar reference.
#include "strata/cpu/dot_rows.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockQ8_K;
using quant::kIQ1SGrid;

// Grid entries a (lanes 0..7) and b (lanes 8..15).
inline int8x16_t grid_pair(int a, int b) {
  return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(kIQ1SGrid[a]), vcreate_u64(kIQ1SGrid[b])));
}

float dot_iq1_s(int64_t nb, const BlockIQ1_S* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {  // groups of 32 elements: one scale, one delta sign
      const int k = 4 * g;         // the group's first run
      const int8_t* q8 = y[i].qs + 32 * g;
      const int8x16_t w0 = grid_pair(quant::iq1_s_index(x[i], k), quant::iq1_s_index(x[i], k + 1));
      const int8x16_t w1 = grid_pair(quant::iq1_s_index(x[i], k + 2), quant::iq1_s_index(x[i], k + 3));
      const int part = vaddvq_s32(dot_s8(dot_s8(vdupq_n_s32(0), w0, vld1q_s8(q8)), w1, vld1q_s8(q8 + 16)));
      const int q8sum = y[i].bsums[2 * g] + y[i].bsums[2 * g + 1];
      isum += quant::iq1_s_odd_scale(x[i], g) * (8 * part + (quant::iq1_s_delta_negative(x[i], g) ? -q8sum : q8sum));
    }
    sum += (half(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq1_m(int64_t nb, const BlockIQ1_M* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 16; ++h) {  // halves of 16 elements (runs 2h, 2h + 1): one scale each
      const int k = 2 * h;
      // ±1 per run: −1 where its delta sign is set.
      const int8x8_t d0 = vdup_n_s8(static_cast<int8_t>(1 - 2 * quant::iq1_m_delta_negative(x[i], k)));
      const int8x8_t d1 = vdup_n_s8(static_cast<int8_t>(1 - 2 * quant::iq1_m_delta_negative(x[i], k + 1)));
      const int8x16_t grid = grid_pair(quant::iq1_m_index(x[i], k), quant::iq1_m_index(x[i], k + 1));
      const int8x16_t w = vaddq_s8(vshlq_n_s8(grid, 3), vcombine_s8(d0, d1));  // 8·g ± 1
      isum += quant::iq1_m_odd_scale(x[i], h) * dot16(w, vld1q_s8(y[i].qs + 16 * h));
    }
    sum += (half(quant::iq1_m_d(x[i])) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

}  // namespace

void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_S, dot_iq1_s>(n, w, stride, nrows, act, out);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_M, dot_iq1_m>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
