// IQ2_XXS, IQ2_XS and IQ3_XXS to f32: codebook magnitudes times the block scale, sign flipped per
// element, with the float operations of ggml's dequantize_row_iq2_xxs / _iq2_xs / _iq3_xxs (and
// gguf.quants) in the same order, so the results are bitwise equal.
#include <cstring>

#include "strata/quant/dequantize_formats.h"
#include "strata/quant/iq_grids.h"
#include "strata/util/fp16.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace strata::quant::detail {

void dequant_iq2_xxs(const BlockIQ2_XXS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      uint32_t aux[2];
      std::memcpy(aux, b[i].qs + 4 * g, 8);
      const float db = d * (0.5f + static_cast<float>(aux[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const int q = static_cast<int>((aux[0] >> (8 * l)) & 0xFF);
        const uint8_t signs = kIQSigns[(aux[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) {
          const float v = db * static_cast<float>(iq2xxs_grid_value(q, j));
          y[j] = (signs >> j) & 1 ? -v : v;
        }
      }
    }
  }
}

void dequant_iq2_xs(const BlockIQ2_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      const float db[2] = {d * (0.5f + static_cast<float>(b[i].scales[g] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(b[i].scales[g] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = b[i].qs[4 * g + l];
        const uint8_t signs = kIQSigns[q >> 9];
        for (int j = 0; j < 8; ++j) {
          const float v = db[l / 2] * static_cast<float>(iq2xs_grid_value(q & 511, j));
          y[j] = (signs >> j) & 1 ? -v : v;
        }
      }
    }
  }
}

void dequant_iq3_xxs(const BlockIQ3_XXS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const uint8_t* qs = b[i].qs;
    for (int g = 0; g < 8; ++g) {
      uint32_t aux;
      std::memcpy(&aux, b[i].qs + kQK_K / 4 + 4 * g, 4);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t signs = kIQSigns[(aux >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) {
          const float v = db * static_cast<float>(iq3xxs_grid_value(qs[2 * l + j / 4], j % 4));
          y[j] = (signs >> j) & 1 ? -v : v;
        }
      }
      qs += 8;
    }
  }
}

}  // namespace strata::quant::detail
