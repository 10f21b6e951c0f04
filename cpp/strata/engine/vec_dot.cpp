// Multiplies and adds stay separate (no FMA contraction) so the AVX2 path can match bit for bit;
// the *_fused kernels ask for their fused multiply-adds explicitly (std::fma).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "strata/engine/vec_dot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "strata/cpu/features.h"
#include "strata/util/fp16.h"

namespace strata::engine {

// The order of operations is that of the AVX2 kernel (avx2/vec_dot_avx2.cpp), the constants exp_poly's.
float exp_f32(float x) {
  using namespace exp_poly;
  if (x != x) return x;
  if (x < kLo) return 0.0f;
  if (x > kHi) return std::numeric_limits<float>::infinity();
  const float t = x * kLog2e;
  const float fx = std::floor(t + 0.5f);
  float r = x - fx * kLn2Hi;
  r = r - fx * kLn2Lo;
  const float z = r * r;
  float y = kP[0];
  for (int i = 1; i < 6; ++i) y = y * r + kP[i];
  y = y * z + r;
  y = y + 1.0f;
  const auto n = static_cast<int32_t>(fx);
  return y * std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

namespace {

void exp_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}

void swiglu_scalar(const float* g, const float* u, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = g[i] / (1.0f + exp_f32(-g[i]));
    h[i] = s * u[i];
  }
}

float dot_f32_scalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      const float p = a[i + l] * b[i + l];
      acc[l] = acc[l] + p;
    }
  for (int l = 0; i < n; ++i, ++l) {
    const float p = a[i] * b[i];
    acc[l] = acc[l] + p;
  }
  return reduce8(acc);
}

float dot_i8_scalar(const float* a, const int8_t* q, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      const float p = a[i + l] * static_cast<float>(q[i + l]);
      acc[l] = acc[l] + p;
    }
  for (int l = 0; i < n; ++i, ++l) {
    const float p = a[i] * static_cast<float>(q[i]);
    acc[l] = acc[l] + p;
  }
  return reduce8(acc);
}

void axpy_f32_scalar(float w, const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = w * x[i];
    out[i] = out[i] + p;
  }
}

float dot_f32_fused_scalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  for (int l = 0; i < n; ++i, ++l) acc[l] = std::fma(a[i], b[i], acc[l]);
  return reduce8(acc);
}

void axpy_f32_fused_scalar(float w, const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(w, x[i], out[i]);
}

void axpy_i8_scalar(float w, const int8_t* q, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = w * static_cast<float>(q[i]);
    out[i] = out[i] + p;
  }
}

int64_t first_above_scalar(const float* x, int64_t n, float floor) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > floor || !(x[i] < kInf)) return i;
  return n;
}

float exp_sum_scalar(const float* x, int64_t n, float ref) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float e = exp_f32(x[i] - ref);
    acc[i % 16] = acc[i % 16] + e;
  }
  return reduce_exp_lanes(acc);
}

float max_scalar(const float* x, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) best = std::max(best, x[i]);
  return best + 0.0f;  // −0 -> +0: ties between zeros keep whichever came first, per path
}

float shift_by_max_scalar(const float* x, int64_t n, float* y) {
  const float m = max_scalar(x, n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - m;
  return m;
}

void to_fp16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

const VecKernels kScalar{dot_f32_scalar,       dot_i8_scalar,         axpy_f32_scalar, axpy_i8_scalar,
                         dot_f32_fused_scalar, axpy_f32_fused_scalar, exp_scalar,      swiglu_scalar,
                         first_above_scalar,   exp_sum_scalar,        max_scalar,      shift_by_max_scalar,
                         to_fp16_scalar};

}  // namespace

const VecKernels& vec_kernels_scalar() { return kScalar; }

const VecKernels& vec_kernels() {
#if defined(STRATA_HAVE_AVX512_TU)
  if (cpu::active_isa() == cpu::Isa::Avx512) return vec_kernels_avx512();
#endif
#if defined(STRATA_HAVE_AVX2_TU)
  if (cpu::isa_has_avx2(cpu::active_isa())) return vec_kernels_avx2();
#endif
  return kScalar;
}

}  // namespace strata::engine
