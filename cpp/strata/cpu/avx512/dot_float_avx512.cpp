// AVX-512 dots of the plain float formats (F32, F16 via vcvtph2ps, BF16 by shifting) with f32
// activations: four independent 16-lane accumulators per row, the tail under a mask.
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"

namespace strata::cpu::avx512 {
namespace {

struct F32Load {
  using T = float;
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Load {
  using T = uint16_t;
  static __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(loadu256(p)); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Load {
  using T = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load16(const uint16_t* p) { return widen(loadu256(p)); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <typename L>
float dot_row(int64_t n, const typename L::T* w, const float* x) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(L::load16(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(L::load16(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(L::load16(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(L::load16(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(L::load16(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(L::load_masked(w + i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <typename L>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* x = static_cast<const float*>(act);
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot_row<L>(n, reinterpret_cast<const typename L::T*>(p + static_cast<std::size_t>(r) * stride), x);
}

}  // namespace

void dot_rows_f32(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<F32Load>(n, w, stride, nrows, act, out);
}
void dot_rows_f16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<F16Load>(n, w, stride, nrows, act, out);
}
void dot_rows_bf16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BF16Load>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx512
