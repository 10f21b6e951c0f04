#include "strata/quant/dequantize.h"

#include <cstring>
#include <string>

#include "strata/quant/blocks.h"
#include "strata/quant/dequantize_formats.h"
#include "strata/util/error.h"
#include "strata/util/fp16.h"

// The compiler must not fuse a*b - c into an FMA here: ggml and numpy round the product first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace strata::quant {
namespace {

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      y[j] = d * static_cast<float>((b[i].qs[j] & 0xF) - 8);
      y[j + 16] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_fp32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK32; ++j) y[j] = d * static_cast<float>(q5_quant(b[i], qh, j) - 16);
  }
}

// d * q + m as two roundings, as gguf.quants computes it (this file is built without contraction).
void dequant_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK32; ++j) y[j] = d * static_cast<float>(q5_quant(b[i], qh, j)) + m;
  }
}

void dequant_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      y[j] = d * static_cast<float>(kIQ4NLValues[b[i].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIQ4NLValues[b[i].qs[j] >> 4]);
    }
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b[i].qs + 32 * h;
      for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[i].scales[8 * h + 2 * s + half];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * half; l < 16 * half + 16; ++l) *y++ = dl * static_cast<float>((q[l] >> (2 * s)) & 3) - ml;
        }
      }
    }
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
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
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] >> shift) & 0xF) - m1;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      float* yh = y + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        yh[l] = (d * static_cast<float>(sc[is + 0])) * static_cast<float>(q1);
        yh[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
        yh[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
        yh[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
      }
    }
    y += kQK_K;
  }
}

void dequant_iq4_xs(const BlockIQ4_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 8; ++g, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(b[i], g));
      const uint8_t* q = b[i].qs + 16 * g;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIQ4NLValues[q[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIQ4NLValues[q[j] >> 4]);
      }
    }
  }
}

}  // namespace

void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n) {
  if (!type_supported(type))
    throw_error(ErrorKind::Value, std::string("no dequantization for type ") + type_name(type));
  const int64_t nb = static_cast<int64_t>(row_bytes(type, n) / type_size(type));  // validates n
  switch (type) {
    case GGMLType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case GGMLType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case GGMLType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case GGMLType::Q4_0: return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GGMLType::Q5_0: return dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case GGMLType::Q5_1: return dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case GGMLType::IQ4_NL: return dequant_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb);
    case GGMLType::Q8_0: return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GGMLType::Q2_K: return dequant_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
    case GGMLType::Q3_K: return detail::dequant_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
    case GGMLType::Q5_K: return detail::dequant_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case GGMLType::IQ2_XXS: return detail::dequant_iq2_xxs(static_cast<const BlockIQ2_XXS*>(src), dst, nb);
    case GGMLType::IQ2_XS: return detail::dequant_iq2_xs(static_cast<const BlockIQ2_XS*>(src), dst, nb);
    case GGMLType::IQ2_S: return detail::dequant_iq2_s(static_cast<const BlockIQ2_S*>(src), dst, nb);
    case GGMLType::IQ3_XXS: return detail::dequant_iq3_xxs(static_cast<const BlockIQ3_XXS*>(src), dst, nb);
    case GGMLType::IQ3_S: return detail::dequant_iq3_s(static_cast<const BlockIQ3_S*>(src), dst, nb);
    case GGMLType::IQ1_S: return detail::dequant_iq1_s(static_cast<const BlockIQ1_S*>(src), dst, nb);
    case GGMLType::IQ1_M: return detail::dequant_iq1_m(static_cast<const BlockIQ1_M*>(src), dst, nb);
    case GGMLType::Q4_K: return dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GGMLType::Q6_K: return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case GGMLType::IQ4_XS: return dequant_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb);
    default: break;
  }
  throw_error(ErrorKind::Internal, std::string("dequantize_row: unhandled type ") + type_name(type));
}

}  // namespace strata::quant
