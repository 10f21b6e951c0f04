// AVX-512 dots of the plain float formats (F32, F16 via vcvtph2ps, BF16 by shifting) with f32
// activations.
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"

namespace strata::cpu::avx512 {
namespace {

struct F32Load {
  using T = float;
  static float load1(const float* p) { return *p; }
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Load {
  using T = uint16_t;
  static float load1(const uint16_t* p) { return fp16(*p); }
  static __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(loadu256(p)); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Load {
  using T = uint16_t;
  static float load1(const uint16_t* p) {
    const uint32_t u = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load16(const uint16_t* p) { return widen(loadu256(p)); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// The AVX2 kernel's arithmetic (cpu/avx2/dot_float_avx2.cpp) on 512-bit registers: its four
// 8-lane accumulators a0..a3 are the halves of acc01 and acc23, each 32-element step is two FMAs
// instead of four, an 8-element step updates a0 alone (the other lanes add 0·0), the scalar tail
// and the final reduction are the same, so results are bitwise the AVX2 path's when n is a multiple
// of 8 (the scalar tail's FMA contraction is the compiler's choice in each file).
template <typename L>
float dot_row(int64_t n, const typename L::T* w, const float* x) {
  __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc01 = _mm512_fmadd_ps(L::load16(w + i), _mm512_loadu_ps(x + i), acc01);
    acc23 = _mm512_fmadd_ps(L::load16(w + i + 16), _mm512_loadu_ps(x + i + 16), acc23);
  }
  for (; i + 8 <= n; i += 8)
    acc01 = _mm512_fmadd_ps(L::load_masked(w + i, 0xFF), _mm512_maskz_loadu_ps(0xFF, x + i), acc01);
  float tail = 0.0f;
  for (; i < n; ++i) tail += L::load1(w + i) * x[i];
  const __m256 a0 = _mm512_castps512_ps256(acc01), a1 = _mm512_extractf32x8_ps(acc01, 1);
  const __m256 a2 = _mm512_castps512_ps256(acc23), a3 = _mm512_extractf32x8_ps(acc23, 1);
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r) + tail;
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
