// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S to f32: codebook magnitudes times the group scale, sign
// flipped per element, with the float operations of ggml's dequantize_row_iq2_xxs / _iq2_xs /
// _iq2_s / _iq3_xxs / _iq3_s (and gguf.quants) in the same order, so the results are bitwise equal.
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
namespace {

// One run of 8 elements: db · magnitude(j), negated where bit j of signs is set.
template <typename Magnitude>
void decode_run(float db, Magnitude magnitude, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    const float v = db * static_cast<float>(magnitude(j));
    y[j] = (signs >> j) & 1 ? -v : v;
  }
}

}  // namespace

void dequant_iq2_xxs(const BlockIQ2_XXS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      uint32_t aux[2];
      std::memcpy(aux, b[i].qs + 4 * g, 8);
      const float db = d * (0.5f + static_cast<float>(aux[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const int q = static_cast<int>((aux[0] >> (8 * l)) & 0xFF);
        decode_run(db, [q](int j) { return iq2xxs_grid_value(q, j); }, kIQSigns[(aux[1] >> (7 * l)) & 127], y);
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
        decode_run(db[l / 2], [q](int j) { return iq2xs_grid_value(q & 511, j); }, kIQSigns[q >> 9], y);
      }
    }
  }
}

void dequant_iq2_s(const BlockIQ2_S* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int h = 0; h < 16; ++h) {
      const float db = d * (0.5f + static_cast<float>(iq_scale_nibble(b[i], h))) * 0.25f;
      for (int k = 2 * h; k < 2 * h + 2; ++k, y += 8) {
        const int q = iq2_s_index(b[i], k);
        decode_run(db, [q](int j) { return iq2s_grid_value(q, j); }, b[i].signs[k], y);
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
      for (int l = 0; l < 4; ++l, y += 8)
        decode_run(
            db, [qs, l](int j) { return iq3xxs_grid_value(qs[2 * l + j / 4], j % 4); },
            kIQSigns[(aux >> (7 * l)) & 127], y);
      qs += 8;
    }
  }
}

void dequant_iq3_s(const BlockIQ3_S* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g) {
      const float db = d * static_cast<float>(iq_odd_scale(b[i], g));
      for (int l = 0; l < 4; ++l, y += 8) {
        const int k = 8 * g + 2 * l;  // the run's two grid indices: k, k + 1
        decode_run(
            db, [&b, i, k](int j) { return iq3s_grid_value(iq3_s_index(b[i], k + j / 4), j % 4); },
            b[i].signs[4 * g + l], y);
      }
    }
  }
}

}  // namespace strata::quant::detail
