// AVX-512 activation quantizers. Bitwise identical to the scalar rules in quant/quantize.cpp:
// Q8_0 rounds half away from zero (roundf, emulated exactly), Q8_K rounds half to even.
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

// roundf: truncate, then step away from zero where the dropped fraction is at least one half.
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = abs_ps(_mm512_sub_ps(v, t));
  const __m512 step = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm512_mask_add_ps(t, up, t, step);
}

}  // namespace

void quantize_act_q8_0(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_0*>(act);
  for (int64_t i = 0; i < n / quant::kQK32; ++i, x += quant::kQK32) {
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = hmax(_mm512_max_ps(abs_ps(v0), abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m512 vid = _mm512_set1_ps(id);
    v0 = round_half_away(_mm512_mul_ps(v0, vid));
    v1 = round_half_away(_mm512_mul_ps(v1, vid));
    const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(v0));
    const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(v1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16), q1);
  }
}

void quantize_act_q8_k(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_K*>(act);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, x += quant::kQK_K) {
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < quant::kQK_K; j += 16) m = _mm512_max_ps(m, abs_ps(_mm512_loadu_ps(x + j)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(quant::BlockQ8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int j = 0; j < quant::kQK_K; j += 16) {
      const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), vs);
      const __m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      y[i].bsums[j / 16] = static_cast<int16_t>(hsum_i32(q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + j), _mm512_cvtsepi32_epi8(q));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::cpu::avx512
