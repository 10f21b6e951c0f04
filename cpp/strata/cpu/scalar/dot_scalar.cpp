// Portable reference dot kernels: plain loops, integer block sums exactly as ggml's
// ggml_vec_dot_*_ref, f32 accumulation. Every SIMD path is tested against these.
#include <cstring>

#include "strata/cpu/kernels.h"
#include "strata/cpu/scalar/dot_scalar_rows.h"
#include "strata/quant/blocks.h"
#include "strata/quant/quantize.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using namespace strata::quant;

template <typename Load>
float dot_float_row(int64_t n, const Load& load, const float* x) {
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += load(i + k) * x[i + k];
  for (; i < n; ++i) s[0] += load(i) * x[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

float dot_f32(int64_t n, const void* w, const void* a) {
  const auto* p = static_cast<const float*>(w);
  return dot_float_row(n, [p](int64_t i) { return p[i]; }, static_cast<const float*>(a));
}

float dot_f16(int64_t n, const void* w, const void* a) {
  const auto* p = static_cast<const uint16_t*>(w);
  return dot_float_row(n, [p](int64_t i) { return fp16_to_fp32(p[i]); }, static_cast<const float*>(a));
}

float dot_bf16(int64_t n, const void* w, const void* a) {
  const auto* p = static_cast<const uint16_t*>(w);
  return dot_float_row(n, [p](int64_t i) { return bf16_to_fp32(p[i]); }, static_cast<const float*>(a));
}

float dot_q4_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      sumi += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
      sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    }
    sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

float dot_q5_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQK32; ++j) sumi += (quant::q5_quant(x[i], qh, j) - 16) * y[i].qs[j];
    sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

// x = d * q + m: the block's dot is d·dy·Σq·y + m·dy·Σy, both sums exact in int.
float dot_q5_1(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_1*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int sumi = 0;
    int sumy = 0;
    for (int j = 0; j < kQK32; ++j) {
      sumi += quant::q5_quant(x[i], qh, j) * y[i].qs[j];
      sumy += y[i].qs[j];
    }
    const float dy = fp16_to_fp32(y[i].d);
    sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * dy);
    sum += static_cast<float>(sumy) * (fp16_to_fp32(x[i].m) * dy);
  }
  return sum;
}

float dot_iq4_nl(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_NL*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      sumi += kIQ4NLValues[x[i].qs[j] & 0xF] * y[i].qs[j];
      sumi += kIQ4NLValues[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    }
    sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

float dot_q8_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK32; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

float dot_q2_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int summs = 0;
    for (int g = 0; g < 16; ++g) summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[i].qs + 32 * h;
      const int8_t* q8 = y[i].qs + 128 * h;
      for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
          int part = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) part += ((q[l] >> (2 * s)) & 3) * q8[32 * s + l];
          isum += (x[i].scales[8 * h + 2 * s + half] & 0xF) * part;
        }
      }
    }
    const float dall = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float dot_q4_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, summs = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      q4_k_scale_min(g, x[i].scales, sc, m);
      const uint8_t* q = x[i].qs + 32 * (g / 2);
      const int8_t* q8 = y[i].qs + 32 * g;
      const int shift = 4 * (g % 2);
      int part = 0;
      for (int l = 0; l < 32; ++l) part += ((q[l] >> shift) & 0xF) * q8[l];
      isum += sc * part;
      summs += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* q8 = y[i].qs + 128 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      int part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        part[is + 0] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * q8[l];
        part[is + 2] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
        part[is + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
        part[is + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
      }
      for (int g = 0; g < 8; ++g) isum += sc[g] * part[g];
    }
    sum += (y[i].d * fp16_to_fp32(x[i].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      const uint8_t* q = x[i].qs + 16 * g;
      const int8_t* q8 = y[i].qs + 32 * g;
      int part = 0;
      for (int j = 0; j < 16; ++j) {
        part += kIQ4NLValues[q[j] & 0xF] * q8[j];
        part += kIQ4NLValues[q[j] >> 4] * q8[j + 16];
      }
      isum += iq4_xs_scale(x[i], g) * part;
    }
    sum += (y[i].d * fp16_to_fp32(x[i].d)) * static_cast<float>(isum);
  }
  return sum;
}

template <float (*Dot)(int64_t, const void*, const void*)>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < nrows; ++r) out[r] = Dot(n, p + static_cast<std::size_t>(r) * stride, act);
}

void act_q8_0(const float* x, void* a, int64_t n) { quantize_row_q8_0(x, static_cast<BlockQ8_0*>(a), n); }
void act_q8_k(const float* x, void* a, int64_t n) { quantize_row_q8_k(x, static_cast<BlockQ8_K*>(a), n); }

constexpr DotKernel kF32{GGMLType::F32, nullptr, rows<dot_f32>, nullptr};
constexpr DotKernel kF16{GGMLType::F32, nullptr, rows<dot_f16>, nullptr};
constexpr DotKernel kBF16{GGMLType::F32, nullptr, rows<dot_bf16>, nullptr};
constexpr DotKernel kQ4_0{GGMLType::Q8_0, act_q8_0, rows<dot_q4_0>, nullptr};
constexpr DotKernel kQ5_0{GGMLType::Q8_0, act_q8_0, rows<dot_q5_0>, nullptr};
constexpr DotKernel kQ5_1{GGMLType::Q8_0, act_q8_0, rows<dot_q5_1>, nullptr};
constexpr DotKernel kIQ4_NL{GGMLType::Q8_0, act_q8_0, rows<dot_iq4_nl>, nullptr};
constexpr DotKernel kQ8_0{GGMLType::Q8_0, act_q8_0, rows<dot_q8_0>, nullptr};
constexpr DotKernel kQ2_K{GGMLType::Q8_K, act_q8_k, rows<dot_q2_k>, nullptr};
constexpr DotKernel kQ4_K{GGMLType::Q8_K, act_q8_k, rows<dot_q4_k>, nullptr};
constexpr DotKernel kQ6_K{GGMLType::Q8_K, act_q8_k, rows<dot_q6_k>, nullptr};
constexpr DotKernel kIQ4_XS{GGMLType::Q8_K, act_q8_k, rows<dot_iq4_xs>, nullptr};
constexpr DotKernel kQ3_K{GGMLType::Q8_K, act_q8_k, dot_rows_q3_k, nullptr};
constexpr DotKernel kQ5_K{GGMLType::Q8_K, act_q8_k, dot_rows_q5_k, nullptr};
constexpr DotKernel kIQ2_XXS{GGMLType::Q8_K, act_q8_k, dot_rows_iq2_xxs, nullptr};
constexpr DotKernel kIQ2_XS{GGMLType::Q8_K, act_q8_k, dot_rows_iq2_xs, nullptr};
constexpr DotKernel kIQ2_S{GGMLType::Q8_K, act_q8_k, dot_rows_iq2_s, nullptr};
constexpr DotKernel kIQ3_XXS{GGMLType::Q8_K, act_q8_k, dot_rows_iq3_xxs, nullptr};
constexpr DotKernel kIQ3_S{GGMLType::Q8_K, act_q8_k, dot_rows_iq3_s, nullptr};
constexpr DotKernel kIQ1_S{GGMLType::Q8_K, act_q8_k, dot_rows_iq1_s, nullptr};
constexpr DotKernel kIQ1_M{GGMLType::Q8_K, act_q8_k, dot_rows_iq1_m, nullptr};

}  // namespace

const DotKernel* kernel(GGMLType type) {
  switch (type) {
    case GGMLType::F32: return &kF32;
    case GGMLType::F16: return &kF16;
    case GGMLType::BF16: return &kBF16;
    case GGMLType::Q4_0: return &kQ4_0;
    case GGMLType::Q5_0: return &kQ5_0;
    case GGMLType::Q5_1: return &kQ5_1;
    case GGMLType::IQ4_NL: return &kIQ4_NL;
    case GGMLType::Q8_0: return &kQ8_0;
    case GGMLType::Q2_K: return &kQ2_K;
    case GGMLType::Q4_K: return &kQ4_K;
    case GGMLType::Q6_K: return &kQ6_K;
    case GGMLType::IQ4_XS: return &kIQ4_XS;
    case GGMLType::Q3_K: return &kQ3_K;
    case GGMLType::Q5_K: return &kQ5_K;
    case GGMLType::IQ2_XXS: return &kIQ2_XXS;
    case GGMLType::IQ2_XS: return &kIQ2_XS;
    case GGMLType::IQ2_S: return &kIQ2_S;
    case GGMLType::IQ3_XXS: return &kIQ3_XXS;
    case GGMLType::IQ3_S: return &kIQ3_S;
    case GGMLType::IQ1_S: return &kIQ1_S;
    case GGMLType::IQ1_M: return &kIQ1_M;
    default: return repacked_kernel(type);
  }
}

}  // namespace strata::cpu::scalar
