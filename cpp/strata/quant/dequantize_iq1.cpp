// IQ1_S and IQ1_M to f32: each grid value g (−1, 0, +1) shifted by ±kIQ1Delta, times the scale of its
// group (IQ1_S: 32 elements) or half-group (IQ1_M: 16), with the float operations of gguf.quants
// (dl · (g + delta), dl = d · (2s + 1)) in the same order, so the results are bitwise equal.
#include "strata/quant/dequantize_formats.h"
#include "strata/quant/iq_grids.h"
#include "strata/util/fp16.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace strata::quant::detail {
namespace {

// One run of 8 elements: dl · (grid value j of entry q + delta).
void decode_run(float dl, float delta, int q, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(iq1s_grid_value(q, j)) + delta);
}

}  // namespace

void dequant_iq1_s(const BlockIQ1_S* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      const float dl = d * static_cast<float>(iq1_s_odd_scale(b[i], g));
      const float delta = iq1_s_delta_negative(b[i], g) ? -kIQ1Delta : kIQ1Delta;
      for (int l = 0; l < 4; ++l, y += 8) decode_run(dl, delta, iq1_s_index(b[i], 4 * g + l), y);
    }
  }
}

void dequant_iq1_m(const BlockIQ1_M* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(iq1_m_d(b[i]));
    for (int k = 0; k < 32; ++k, y += 8) {
      const float dl = d * static_cast<float>(iq1_m_odd_scale(b[i], k / 2));
      decode_run(dl, iq1_m_delta_negative(b[i], k) ? -kIQ1Delta : kIQ1Delta, iq1_m_index(b[i], k), y);
    }
  }
}

}  // namespace strata::quant::detail
