// AVX-512 entries of engine/vec_dot.h: exp_f32 and SwiGLU on 16 lanes (the softmax of the attention
// and the MoE's SwiGLU run them on every row). The same constants and the same operations per lane as
// exp_f32 and the AVX2 kernels, multiplies and adds separate, out-of-range lanes replaced through
// masks instead of blends: each lane is bitwise the scalar function's. The dots and axpys stay the
// AVX2 kernels (head-sized vectors: 8 lanes are not what limits them).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

// GCC 12 reports its own AVX-512 conversions as reading an uninitialized value (the header's
// __Y = __Y idiom), as in cpu/avx512/simd_avx512.h.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include "strata/engine/vec_dot.h"

namespace strata::engine {
namespace {

inline __m512 exp16(__m512 x) {
  using namespace exp_poly;
  const __m512 lo = _mm512_set1_ps(kLo), hi = _mm512_set1_ps(kHi);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 fx = _mm512_roundscale_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _mm512_set1_ps(0.5f)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(fx, _mm512_set1_ps(kLn2Hi)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(fx, _mm512_set1_ps(kLn2Lo)));
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(kP[i]));
  y = _mm512_add_ps(_mm512_mul_ps(y, z), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

void exp_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    // The tail through a masked load and store (lanes past n compute on zeros and are not stored).
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void swiglu_avx512(const float* g, const float* u, float* h, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  auto step = [&](__m512 vg, __m512 vu) {
    const __m512 ng = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(vg), sign));  // −g, exactly
    const __m512 s = _mm512_div_ps(vg, _mm512_add_ps(one, exp16(ng)));
    return _mm512_mul_ps(s, vu);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(h + i, step(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(h + i, m, step(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

int64_t first_above_avx512(const float* x, int64_t n, float floor) {
  const __m512 f = _mm512_set1_ps(floor), inf = _mm512_set1_ps(__builtin_inff());
  auto hits = [&](__m512 v) {
    return static_cast<unsigned>(_mm512_cmp_ps_mask(v, f, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, inf, _CMP_NLT_UQ));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    if (const unsigned m = hits(_mm512_loadu_ps(x + i))) return i + __builtin_ctz(m);
  if (i < n) {
    const __mmask16 t = static_cast<__mmask16>((1u << (n - i)) - 1u);
    // Lanes past n load -inf, which nothing is above.
    if (const unsigned m = hits(_mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), t, x + i)) & t)
      return i + __builtin_ctz(m);
  }
  return n;
}

float exp_sum_avx512(const float* x, int64_t n, float ref) {
  // exp_sum's 16 partial sums in one register; the tail's lanes past n add 0 (masked), so lane l still
  // takes exactly the i ≡ l mod 16.
  const __m512 r = _mm512_set1_ps(ref);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), r)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    acc = _mm512_mask_add_ps(acc, m, acc, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), r)));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  return reduce_exp_lanes(lanes);
}

}  // namespace

const VecKernels& vec_kernels_avx512() {
  static const VecKernels k = [] {
    VecKernels t = vec_kernels_avx2();
    t.exp = exp_avx512;
    t.swiglu = swiglu_avx512;
    t.first_above = first_above_avx512;
    t.exp_sum = exp_sum_avx512;
    return t;
  }();
  return k;
}

}  // namespace strata::engine
