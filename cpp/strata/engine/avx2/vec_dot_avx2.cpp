// AVX2 versions of engine/vec_dot.h: the same lane assignment and reduction tree as the portable
// kernels, with multiplies and adds kept separate, so the results are bitwise equal.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <immintrin.h>

#include "strata/engine/vec_dot.h"

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

// A GQA group's heads against one cell (int8 or f32 K/V): up to four dots / axpys per pass over the
// cell's vector, each chunk loaded (and converted) once; each accumulator sees the operations of
// the single call (dot_i8_avx2 / dot_f32_avx2, axpy_i8_avx2 / axpy_f32_avx2).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const int8_t* q) { return load_i8x8(q); }
inline float finish_dot(__m256 v, const float* a, const float* b, int64_t i, int64_t n) {
  return finish(v, a, b, nullptr, i, n);
}
inline float finish_dot(__m256 v, const float* a, const int8_t* q, int64_t i, int64_t n) {
  return finish(v, a, nullptr, q, i, n);
}

template <typename T, int G>
void dot_group(const float* const* a, const T* b, int64_t n, float* out) {
  const float* x[G];
  __m256 acc[G];
  for (int g = 0; g < G; ++g) {
    x[g] = a[g];
    acc[g] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 k = load8(b + i);
    for (int g = 0; g < G; ++g) acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_loadu_ps(x[g] + i), k));
  }
  for (int g = 0; g < G; ++g) out[g] = finish_dot(acc[g], x[g], b, i, n);
}

// Pointers and weights held in registers across the pass.
template <typename T, int G>
void axpy_group(const float* w, const T* b, int64_t n, float* const* outs) {
  float* o[G];
  __m256 vw[G];
  for (int g = 0; g < G; ++g) {
    o[g] = outs[g];
    vw[g] = _mm256_set1_ps(w[g]);
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 k = load8(b + i);
    for (int g = 0; g < G; ++g)
      _mm256_storeu_ps(o[g] + i, _mm256_add_ps(_mm256_loadu_ps(o[g] + i), _mm256_mul_ps(vw[g], k)));
  }
  for (int g = 0; g < G; ++g)
    for (int64_t j = i; j < n; ++j) {
      const float p = w[g] * static_cast<float>(b[j]);
      o[g][j] = o[g][j] + p;
    }
}

template <typename T>
void dot_multi(const float* const* a, int G, const T* b, int64_t n, float* out) {
  int g = 0;
  for (; G - g >= 4; g += 4) dot_group<T, 4>(a + g, b, n, out + g);
  switch (G - g) {
    case 3: dot_group<T, 3>(a + g, b, n, out + g); break;
    case 2: dot_group<T, 2>(a + g, b, n, out + g); break;
    case 1: dot_group<T, 1>(a + g, b, n, out + g); break;
    default: break;
  }
}

template <typename T>
void axpy_multi(const float* w, int G, const T* b, int64_t n, float* const* outs) {
  int g = 0;
  for (; G - g >= 4; g += 4) axpy_group<T, 4>(w + g, b, n, outs + g);
  switch (G - g) {
    case 3: axpy_group<T, 3>(w + g, b, n, outs + g); break;
    case 2: axpy_group<T, 2>(w + g, b, n, outs + g); break;
    case 1: axpy_group<T, 1>(w + g, b, n, outs + g); break;
    default: break;
  }
}

const VecKernels kAvx2{dot_f32_avx2,      dot_i8_avx2,        axpy_f32_avx2,    axpy_i8_avx2,
                       dot_multi<int8_t>, axpy_multi<int8_t>, dot_multi<float>, axpy_multi<float>};

}  // namespace

const VecKernels& vec_kernels_avx2() { return kAvx2; }

}  // namespace strata::engine
