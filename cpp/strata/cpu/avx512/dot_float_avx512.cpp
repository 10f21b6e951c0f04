// AVX-512 dots of the plain float formats (F32, F16 via vcvtph2ps, BF16 by shifting) with f32
// activations.
#include <cmath>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/float_tiles.h"

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
// instead of four, an 8-element step updates acc01 alone (the other lanes add 0·0), and the scalar
// tail (fused multiply-adds, written out so that no compiler choice of contraction or vectorisation
// can change it) and the final reduction are the same, so results are bitwise the AVX2 path's.
// Per (row, activation) a tile runs exactly these operations in this order; it only interleaves
// the independent chains of R rows x A activations (cpu/float_tiles.h).
template <typename L>
float finish(__m512 acc01, __m512 acc23, int64_t i, int64_t n, const typename L::T* w, const float* x) {
  float tail = 0.0f;
  for (; i < n; ++i) tail = std::fma(L::load1(w + i), x[i], tail);
  const __m256 a0 = _mm512_castps512_ps256(acc01), a1 = _mm512_extractf32x8_ps(acc01, 1);
  const __m256 a2 = _mm512_castps512_ps256(acc23), a3 = _mm512_extractf32x8_ps(acc23, 1);
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r) + tail;
}

// v, loaded into a register once (an empty asm the compiler cannot see through): no effect on the
// arithmetic.
inline __m512 in_register(__m512 v) {
#if defined(__GNUC__)
  __asm__("" : "+v"(v));
#endif
  return v;
}

// R weight rows x A activations: 2·R·A accumulators (16 at most of the 32 registers).
template <typename L>
struct Tiles {
  template <int R, int A>
  struct Tile {
    using T = typename L::T;
    // acc[k][a] += w[k][i..i+16) * x[a][i..i+16): R + A loads for R·A FMAs (without the pins the
    // compiler folds one operand's loads into every FMA, R·A loads).
    static void half(const T* const* wr, const float* const* x, int64_t i, __m512 (&acc)[R][A]) {
      __m512 xv[A];
      STRATA_TILE_UNROLL
      for (int a = 0; a < A; ++a) xv[a] = in_register(_mm512_loadu_ps(x[a] + i));
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        const __m512 wv = in_register(L::load16(wr[k] + i));
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a) acc[k][a] = _mm512_fmadd_ps(wv, xv[a], acc[k][a]);
      }
    }

    static void run(int64_t n, const uint8_t* w, std::size_t stride, const float* const* x, float* const* outs,
                    int64_t r) {
      const T* wr[R];
      __m512 acc01[R][A], acc23[R][A];
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        wr[k] = reinterpret_cast<const T*>(w + static_cast<std::size_t>(k) * stride);
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a) acc01[k][a] = acc23[k][a] = _mm512_setzero_ps();
      }
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        half(wr, x, i, acc01);
        half(wr, x, i + 16, acc23);
      }
      for (; i + 8 <= n; i += 8) {
        STRATA_TILE_UNROLL
        for (int k = 0; k < R; ++k) {
          const __m512 w0 = L::load_masked(wr[k] + i, 0xFF);
          STRATA_TILE_UNROLL
          for (int a = 0; a < A; ++a)
            acc01[k][a] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(0xFF, x[a] + i), acc01[k][a]);
        }
      }
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a) outs[a][r + k] = finish<L>(acc01[k][a], acc23[k][a], i, n, wr[k], x[a]);
      }
    }
  };
};

// Four rows per tile for one activation (8 chains); 2 rows x 4 activations for several (of the
// shapes tried, 4 x 3, 3 x 4, 4 x 2 and 2 x 4, the fastest at 2 and 4 activations on Zen 4:
// docs/benchmarks.md, "Float matrices at small row counts").
template <typename L>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* x = static_cast<const float*>(act);
  float_rows<Tiles<L>::template Tile, 4, 1>(n, w, stride, nrows, &x, 1, &out);
}

template <typename L>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  float_rows<Tiles<L>::template Tile, 2, 4>(n, w, stride, nrows, reinterpret_cast<const float* const*>(acts), nact,
                                            outs);
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

void dot_rows_multi_f32(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                        float* const* outs) {
  rows_multi<F32Load>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_f16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                        float* const* outs) {
  rows_multi<F16Load>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_bf16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<BF16Load>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx512
