#pragma once
// The one shape of the NEON dots of the IQ formats with Q8_K activations (dot_iq2_iq3_neon.cpp,
// dot_iq1_neon.cpp). Per group of 32 weights a format's decoder F gives an IqGroup: the 32 signed
// int8 weights in two 16-lane registers and their odd integer scales (one per 32, or one per
// 16-lane half where F::kHalfScales). 16-lane dots against the activation bytes, times the scales,
// add up in int32 lanes; each super-block's lanes are added up exactly (the scalar reference's
// integer sum: exact in any order), then sum += (F::d(x)·d_y)·isum and F::kScale (1/8, 1/4 or 1)
// times the sum at the end: the scalar reference's float steps in its order, under the same
// compile flags (so contracted alike where the compiler fuses the multiply-add), so the results
// are bitwise the scalar kernels'.
//
// The several-activation form (prefill chunks, verification windows) decodes each super-block of a
// row once (the grid lookups, sign and scale fields: most of a one-activation dot's work) and runs
// every activation through exactly the one-activation dot's operations, so each result is bitwise
// that dot's. Everything here has internal linkage (the folder is built once per NEON path).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

// 32 weights of a super-block: lanes 0..15 in lo, 16..31 in hi, signed; s_lo scales lo and s_hi
// scales hi where the format keeps a scale per 16 (F::kHalfScales), else s_lo scales all 32.
struct IqGroup {
  int8x16_t lo, hi;
  int32_t s_lo, s_hi;
};

// acc plus the group's scaled int32 sums against 32 activation bytes.
template <class F>
inline int32x4_t iq_group_acc(int32x4_t acc, const IqGroup& w, const int8_t* q8) {
  if constexpr (F::kHalfScales) {
    acc = vmlaq_n_s32(acc, dot_s8(vdupq_n_s32(0), w.lo, vld1q_s8(q8)), w.s_lo);
    return vmlaq_n_s32(acc, dot_s8(vdupq_n_s32(0), w.hi, vld1q_s8(q8 + 16)), w.s_hi);
  } else {
    const int32x4_t p = dot_s8(dot_s8(vdupq_n_s32(0), w.lo, vld1q_s8(q8)), w.hi, vld1q_s8(q8 + 16));
    return vmlaq_n_s32(acc, p, w.s_lo);
  }
}

template <class F>
float iq_dot(int64_t nb, const typename F::Block* x, const quant::BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* q8 = y[i].qs;
    int32x4_t acc = vdupq_n_s32(0);
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) acc = iq_group_acc<F>(acc, F::group(x[i], g), q8 + 32 * g);
    sum += (F::d(x[i]) * y[i].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return F::kScale * sum;
}

template <class F>
void iq_rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const quant::BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = iq_dot<F>(nb, reinterpret_cast<const typename F::Block*>(p + static_cast<std::size_t>(r) * stride), y);
}

// outs[a][r] for a < nact: row by row, each super-block decoded once for up to kIqActs activations (as
// many as the engine hands a call).
inline constexpr int kIqActs = static_cast<int>(kMaxActGroup);

template <class F>
void iq_rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                   float* const* outs) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* const* y = reinterpret_cast<const quant::BlockQ8_K* const*>(acts);
  const int64_t nb = n / quant::kQK_K;
  for (int a0 = 0; a0 < nact; a0 += kIqActs) {
    const int na = nact - a0 < kIqActs ? nact - a0 : kIqActs;
    const quant::BlockQ8_K* const* ya = y + a0;
    for (int64_t r = 0; r < nrows; ++r) {
      const auto* x = reinterpret_cast<const typename F::Block*>(p + static_cast<std::size_t>(r) * stride);
      float sum[kIqActs];
      for (int a = 0; a < na; ++a) sum[a] = 0.0f;
      for (int64_t i = 0; i < nb; ++i) {
        IqGroup gw[8];
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) gw[g] = F::group(x[i], g);
        const float dx = F::d(x[i]);
        for (int a = 0; a < na; ++a) {
          const int8_t* q8 = ya[a][i].qs;
          int32x4_t acc = vdupq_n_s32(0);
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) acc = iq_group_acc<F>(acc, gw[g], q8 + 32 * g);
          sum[a] += (dx * ya[a][i].d) * static_cast<float>(vaddvq_s32(acc));
        }
      }
      for (int a = 0; a < na; ++a) outs[a0 + a][r] = F::kScale * sum[a];
    }
  }
}

}  // namespace
}  // namespace strata::cpu::STRATA_NEON_NS
