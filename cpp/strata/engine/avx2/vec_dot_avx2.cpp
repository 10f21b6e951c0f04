// AVX2 versions of engine/vec_dot.h: the same lane assignment and reduction tree as the portable
// kernels, with multiplies and adds kept separate (fused in the *_fused kernels, as there), so the
// results are bitwise equal.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "strata/engine/vec_dot.h"
#include "strata/engine/x86/lanes8.h"
#include "strata/util/fp16.h"

namespace strata::engine {
namespace {

inline float finish(__m256 v, const float* a, const float* b_f, const int8_t* b_q, int64_t i, int64_t n) {
  alignas(32) float acc[8];
  _mm256_store_ps(acc, v);
  for (int l = 0; i < n; ++i, ++l) {
    const float p = a[i] * (b_f ? b_f[i] : static_cast<float>(b_q[i]));
    acc[l] = acc[l] + p;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline __m256 load_i8x8(const int8_t* q) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  return finish(acc, a, b, nullptr, i, n);
}

float dot_i8_avx2(const float* a, const int8_t* q, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), load_i8x8(q + i)));
  return finish(acc, a, nullptr, q, i, n);
}

void axpy_f32_avx2(float w, const float* x, int64_t n, float* out) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(vw, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) {
    const float p = w * x[i];
    out[i] = out[i] + p;
  }
}

float dot_f32_fused_avx2(const float* a, const float* b, int64_t n) {
  __m256 v = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), v);
  alignas(32) float acc[8];
  _mm256_store_ps(acc, v);
  for (int l = 0; i < n; ++i, ++l) acc[l] = std::fma(a[i], b[i], acc[l]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void axpy_f32_fused_avx2(float w, const float* x, int64_t n, float* out) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(out + i)));
  for (; i < n; ++i) out[i] = std::fma(w, x[i], out[i]);
}

void axpy_i8_avx2(float w, const int8_t* q, int64_t n, float* out) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(vw, load_i8x8(q + i))));
  for (; i < n; ++i) {
    const float p = w * static_cast<float>(q[i]);
    out[i] = out[i] + p;
  }
}

// exp_f32 (vec_dot.cpp) on 8 lanes: the same constants and operations, so each lane is bitwise the
// scalar function's; out-of-range lanes are computed on a clamped x and replaced afterwards.
inline __m256 exp8(__m256 x) {
  using namespace exp_poly;
  const __m256 lo = _mm256_set1_ps(kLo), hi = _mm256_set1_ps(kHi);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 fx = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(fx, _mm256_set1_ps(kLn2Hi)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(fx, _mm256_set1_ps(kLn2Lo)));
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(kP[i]));
  y = _mm256_add_ps(_mm256_mul_ps(y, z), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    // The tail through a masked load and store, as exp_avx512 does (lanes past n compute on zeros and are
    // not stored): a call of fewer than 8, such as a softmax chunk's factors of a group of heads, stays a
    // vector instead of exp_f32 per element.
    const __m256i m = x86::tail_mask(static_cast<int>(n - i));
    _mm256_maskstore_ps(y + i, m, exp8(_mm256_maskload_ps(x + i, m)));
  }
}

void swiglu_avx2(const float* g, const float* u, float* h, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = _mm256_loadu_ps(g + i);
    const __m256 e = exp8(_mm256_xor_ps(vg, _mm256_set1_ps(-0.0f)));  // −g, exactly
    const __m256 s = _mm256_div_ps(vg, _mm256_add_ps(one, e));
    _mm256_storeu_ps(h + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) {
    const float s = g[i] / (1.0f + exp_f32(-g[i]));
    h[i] = s * u[i];
  }
}

int64_t first_above_avx2(const float* x, int64_t n, float floor) {
  // x > floor (false on NaN), or not x < +inf (NaN or +inf, the unordered predicate): the scalar test.
  const __m256 f = _mm256_set1_ps(floor), inf = _mm256_set1_ps(__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const int m = _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v, f, _CMP_GT_OQ), _mm256_cmp_ps(v, inf, _CMP_NLT_UQ)));
    if (m) return i + __builtin_ctz(static_cast<unsigned>(m));
  }
  for (; i < n; ++i)
    if (x[i] > floor || !(x[i] < __builtin_inff())) return i;
  return n;
}

float exp_sum_avx2(const float* x, int64_t n, float ref) {
  // Lanes 0-7 and 8-15 of exp_sum's 16 partial sums in two registers; the tail (< 16) by the scalar rule.
  const __m256 r = _mm256_set1_ps(ref);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_ps(a0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), r)));
    a1 = _mm256_add_ps(a1, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), r)));
  }
  alignas(32) float acc[16];
  _mm256_store_ps(acc, a0);
  _mm256_store_ps(acc + 8, a1);
  for (int l = 0; i < n; ++i, ++l) {
    const float e = exp_f32(x[i] - ref);
    acc[l] = acc[l] + e;
  }
  return reduce_exp_lanes(acc);
}

// Four registers of running maxima (independent compares); a lane skips a NaN as the scalar rule does
// (_mm256_max_ps(v, best) keeps best where v is NaN).
float max_avx2(const float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 b[4] = {ninf, ninf, ninf, ninf};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) b[k] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), b[k]);
  for (; i + 8 <= n; i += 8) b[0] = _mm256_max_ps(_mm256_loadu_ps(x + i), b[0]);
  const __m256 v = _mm256_max_ps(_mm256_max_ps(b[0], b[1]), _mm256_max_ps(b[2], b[3]));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float best = lanes[0];
  for (int l = 1; l < 8; ++l) best = std::max(best, lanes[l]);
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best + 0.0f;  // a zero maximum as +0 (max_scalar's rule; which zero won a tie differs per path)
}

float shift_by_max_avx2(const float* x, int64_t n, float* y) {
  const float m = max_avx2(x, n);
  const __m256 vm = _mm256_set1_ps(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
  for (; i < n; ++i) y[i] = x[i] - m;
  return m;
}

// F16C's rounding, with NaN lanes (whose payload the instruction keeps) redone by the scalar rule.
void to_fp16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0)
      for (int l = 0; l < 8; ++l) y[i + l] = fp32_to_fp16(x[i + l]);
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

const VecKernels kAvx2{
    dot_f32_avx2, dot_i8_avx2,      axpy_f32_avx2, axpy_i8_avx2, dot_f32_fused_avx2, axpy_f32_fused_avx2, exp_avx2,
    swiglu_avx2,  first_above_avx2, exp_sum_avx2,  max_avx2,     shift_by_max_avx2,  to_fp16_avx2};

}  // namespace

const VecKernels& vec_kernels_avx2() { return kAvx2; }

}  // namespace strata::engine
