// AVX2 activation quantizers. Bitwise identical to the scalar rules in quant/quantize.cpp:
// Q8_0 rounds half away from zero (roundf, emulated exactly), Q8_K rounds half to even.
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

// roundf: truncate, then step away from zero where the dropped fraction is at least one half.
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
}

// Four 8 x int32 vectors (values within ±127) -> 32 int8 in order.
inline __m256i pack_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i a = _mm256_packs_epi32(i0, i1);
  const __m256i b = _mm256_packs_epi32(i2, i3);
  const __m256i c = _mm256_packs_epi16(a, b);
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_act_q8_0(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_0*>(act);
  for (int64_t i = 0; i < n / quant::kQK32; ++i, x += quant::kQK32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
           v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    const float amax = hmax_abs(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 vid = _mm256_set1_ps(id);
    v0 = round_half_away(_mm256_mul_ps(v0, vid));
    v1 = round_half_away(_mm256_mul_ps(v1, vid));
    v2 = round_half_away(_mm256_mul_ps(v2, vid));
    v3 = round_half_away(_mm256_mul_ps(v3, vid));
    const __m256i q =
        pack_i8(_mm256_cvttps_epi32(v0), _mm256_cvttps_epi32(v1), _mm256_cvttps_epi32(v2), _mm256_cvttps_epi32(v3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
  }
}

void quantize_act_q8_k(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_K*>(act);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, x += quant::kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < quant::kQK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax_abs(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(quant::BlockQ8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int j = 0; j < quant::kQK_K; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vs);
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      y[i].bsums[j / 16] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), pack_i8(q[0], q[1], q[2], q[3]));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::cpu::avx2
