// The one shape of the AVX2 dots of the IQ formats with Q8_K activations (dot_iq_avx2.cpp). Per group
// of 32 weights a format's decoder F (iq_groups_avx2.h) gives an IqGroup: the unsigned magnitudes u,
// a register whose bytes carry the weights' signs s (±1 bytes, or the signed weights themselves), and
// the int16 scales of the group's pairs. maddubs(u, sign(q8, s)) then madd by the
// scales sums the group in int32. Each super-block's lanes are added up exactly (int32), then
// sum += (F::d(x)·d_y)·isum and F::kScale (1/8, 1/4 or 1) times the sum at the end, the multiply and
// the add rounded separately (these files are built with -ffp-contract=off): the scalar reference's
// arithmetic, so the results are bitwise the scalar kernels'.
//
// The several-activation form (prefill chunks, verification windows) decodes each super-block of a
// row once (the grid gathers, sign and scale fields: most of a one-activation dot's work) and runs
// every activation through exactly the one-activation dot's operations, so each result is bitwise
// that dot's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "strata/cpu/avx2/iq_groups_avx2.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

// The group's int32 sums against 32 activation bytes.
inline __m256i iq_group_sum(const IqGroup& w, const int8_t* q8) {
  const __m256i p = _mm256_maddubs_epi16(w.u, _mm256_sign_epi8(loadu256(q8), w.s));
  return _mm256_madd_epi16(p, w.scales);
}

template <class F>
float iq_dot(int64_t nb, const typename F::Block* x, const quant::BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) sumi = _mm256_add_epi32(sumi, iq_group_sum(F::group(x[i], g), q8 + 32 * g));
    sum += (F::d(x[i]) * y[i].d) * static_cast<float>(hsum_i32(sumi));
  }
  return F::kScale * sum;
}

// out[r] for nrows rows: Dot is iq_dot<F>, or another dot of the same blocks (the VBMI lookups').
template <class F, float (*Dot)(int64_t, const typename F::Block*, const quant::BlockQ8_K*) = iq_dot<F>>
void iq_rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const quant::BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = Dot(nb, reinterpret_cast<const typename F::Block*>(p + static_cast<std::size_t>(r) * stride), y);
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
    const int na = std::min(kIqActs, nact - a0);
    for (int64_t r = 0; r < nrows; ++r) {
      const auto* x = reinterpret_cast<const typename F::Block*>(p + static_cast<std::size_t>(r) * stride);
      float sum[kIqActs];
      for (int a = 0; a < na; ++a) sum[a] = 0.0f;
      for (int64_t i = 0; i < nb; ++i) {
        IqGroup gw[8];
        for (int g = 0; g < 8; ++g) gw[g] = F::group(x[i], g);
        const float dx = F::d(x[i]);
        for (int a = 0; a < na; ++a) {
          const int8_t* q8 = y[a0 + a][i].qs;
          __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) sumi = _mm256_add_epi32(sumi, iq_group_sum(gw[g], q8 + 32 * g));
          sum[a] += (dx * y[a0 + a][i].d) * static_cast<float>(hsum_i32(sumi));
        }
      }
      for (int a = 0; a < na; ++a) outs[a0 + a][r] = F::kScale * sum[a];
    }
  }
}

}  // namespace
}  // namespace strata::cpu::avx2
