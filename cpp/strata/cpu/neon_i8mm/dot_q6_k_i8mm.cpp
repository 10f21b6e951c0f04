// SMMLA dots of Q6_K with Q8_K activations (cpu/neon_i8mm/, built with +i8mm): per 16-value
// group two SMMLA give the 2 rows × 2 activations tile of exact group sums, scaled in int32 by
// each row's int8 group scale; then per super-block acc = fma(float(sum), d_a·d_w, acc). Every
// lane's arithmetic is its own (tile_rows.h), so several activations in any grouping give bitwise
// the same numbers. One activation runs SDOT per row instead (257 against 229 instructions per
// block under qemu for a tile with the activation repeated), same integers, same fused step.
#include <arm_neon.h>

#include <cmath>

#include "strata/cpu/neon/q6_k_bytes_neon.h"
#include "strata/cpu/neon_i8mm/dot_i8mm.h"
#include "strata/cpu/neon_i8mm/tile_rows.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::neon_i8mm {
namespace {

using quant::BlockQ6_K;
using quant::BlockQ8_K;

struct Q6KTiles {
  using Block = BlockQ6_K;
  using Act = BlockQ8_K;
  static constexpr int64_t kBlockValues = quant::kQK_K;

  template <int RP, int AP>
  static void tiles(int64_t nb, const Block* const* x, const BlockQ8_K* const* y, float32x4_t (&acc)[RP][AP]) {
    for (int p = 0; p < RP; ++p)
      for (int q = 0; q < AP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      for (int p = 0; p < RP; ++p) {
        const BlockQ6_K& xa = x[2 * p][b];
        const BlockQ6_K& xb = x[2 * p + 1][b];
        int32x4_t isum[AP];
        for (int q = 0; q < AP; ++q) isum[q] = vdupq_n_s32(0);
        for (int h = 0; h < 2; ++h) {
          int8x16_t ga[8], gb[8];
          q6k::half_groups(xa, h, ga);
          q6k::half_groups(xb, h, gb);
          for (int k = 0; k < 8; ++k) {
            const int g = 8 * h + k;
            const int32x4_t sc = {xa.scales[g], xa.scales[g], xb.scales[g], xb.scales[g]};
            const int8x16_t w0 = zip_lo(ga[k], gb[k]), w1 = zip_hi(ga[k], gb[k]);
            for (int q = 0; q < AP; ++q) {
              const int8x16_t y0 = vld1q_s8(y[2 * q][b].qs + 16 * g), y1 = vld1q_s8(y[2 * q + 1][b].qs + 16 * g);
              const int32x4_t t = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), w0, zip_lo(y0, y1)), w1, zip_hi(y0, y1));
              isum[q] = vmlaq_s32(isum[q], t, sc);
            }
          }
        }
        const float32x4_t dw = halves(xa.d, xa.d, xb.d, xb.d);
        for (int q = 0; q < AP; ++q) {
          const float ds[4] = {y[2 * q][b].d, y[2 * q + 1][b].d, y[2 * q][b].d, y[2 * q + 1][b].d};
          acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(isum[q]), vmulq_f32(vld1q_f32(ds), dw));
        }
      }
    }
  }
};

// One row against one activation: the tile lane's integers (SDOT) and float step.
float dot_q6_k_row(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h) {
      int8x16_t g[8];
      q6k::half_groups(x[i], h, g);
      const int8_t* q8 = y[i].qs + 128 * h;
      for (int k = 0; k < 8; ++k)
        isum += x[i].scales[8 * h + k] * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), g[k], vld1q_s8(q8 + 16 * k)));
    }
    acc = std::fma(static_cast<float>(isum), y[i].d * half(x[i].d), acc);
  }
  return acc;
}

}  // namespace

void dot_rows_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  for (int64_t r = 0; r < nrows; ++r)
    out[r] =
        dot_q6_k_row(n / quant::kQK_K, reinterpret_cast<const BlockQ6_K*>(p + static_cast<std::size_t>(r) * stride), y);
}
void dot_rows_multi_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q6KTiles>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::neon_i8mm
