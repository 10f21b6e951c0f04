// Q3_K and Q5_K to f32, the float operations of ggml's dequantize_row_q3_K / _q5_K (and numpy's in
// gguf.quants) in the same order, so the results are bitwise equal.

#include "strata/quant/dequantize_formats.h"
#include "strata/util/fp16.h"

// The compiler must not fuse d1 * q - m1 into an FMA: ggml and numpy round the product first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace strata::quant::detail {

void dequant_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b[i].qs + 32 * h;
      for (int s = 0; s < 4; ++s) {
        const uint8_t m = static_cast<uint8_t>(1u << (4 * h + s));
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(q3_k_scale(b[i].scales, 8 * h + 2 * s + half));
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int v = ((q[l] >> (2 * s)) & 3) - ((b[i].hmask[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void dequant_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      q4_k_scale_min(g, b[i].scales, sc, m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* q = b[i].qs + 32 * (g / 2);
      const int shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) | (((b[i].qh[l] >> g) & 1) << 4);
        *y++ = d1 * static_cast<float>(v) - m1;
      }
    }
  }
}

}  // namespace strata::quant::detail
