// AVX2/FMA dots of the plain float formats (F32, F16 via F16C, BF16 by shifting) with f32
// activations: four independent 8-lane accumulators per (row, activation), several rows and
// activations per pass (cpu/float_tiles.h).
#include <cmath>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/float_tiles.h"

namespace strata::cpu::avx2 {
namespace {

struct F32Load {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Load {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(loadu128(p)); }
  static float load1(const uint16_t* p) { return fp16(*p); }
};
struct BF16Load {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(loadu128(p)), 16));
  }
  static float load1(const uint16_t* p) {
    const uint32_t u = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// One (row, activation): a0..a3 over the 32-element steps, a0 alone over the 8-element steps, a
// scalar tail of fused multiply-adds (written out so that no compiler choice of contraction or
// vectorisation can change it), then the reduction below. The AVX-512 kernels repeat exactly this
// (cpu/avx512/dot_float_avx512.cpp), so the two paths give the same bits.
template <typename L>
float finish(__m256 a0, __m256 a1, __m256 a2, __m256 a3, int64_t i, int64_t n, const typename L::T* w, const float* x) {
  float tail = 0.0f;
  for (; i < n; ++i) tail = std::fma(L::load1(w + i), x[i], tail);
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// v, loaded into a register once (an empty asm the compiler cannot see through): no effect on the
// arithmetic.
inline __m256 in_register(__m256 v) {
#if defined(__GNUC__)
  __asm__("" : "+v"(v));
#endif
  return v;
}

// R weight rows x A activations, each with its own four chains: 4·R·A accumulators. The 2 x 2
// tile's 16 leave three of them in memory and still measured fastest (docs/benchmarks.md, "Float
// matrices at small row counts"). A tile interleaves the chains; per (row, activation) the
// operations and their order are finish's above (cpu/float_tiles.h).
template <typename L>
struct Tiles {
  template <int R, int A>
  struct Tile {
    using T = typename L::T;
    // acc[k][a] += w[k][i..i+8) * x[a][i..i+8): R + A loads for R·A FMAs (without the pins the
    // compiler folds one operand's loads into every FMA, R·A loads).
    static void step(const T* const* wr, const float* const* x, int64_t i, __m256 (&acc)[R][A]) {
      __m256 xv[A];
      STRATA_TILE_UNROLL
      for (int a = 0; a < A; ++a) xv[a] = in_register(_mm256_loadu_ps(x[a] + i));
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        const __m256 wv = in_register(L::load8(wr[k] + i));
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a) acc[k][a] = _mm256_fmadd_ps(wv, xv[a], acc[k][a]);
      }
    }

    static void run(int64_t n, const uint8_t* w, std::size_t stride, const float* const* x, float* const* outs,
                    int64_t r) {
      const T* wr[R];
      __m256 acc[4][R][A];
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        wr[k] = reinterpret_cast<const T*>(w + static_cast<std::size_t>(k) * stride);
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a) acc[0][k][a] = acc[1][k][a] = acc[2][k][a] = acc[3][k][a] = _mm256_setzero_ps();
      }
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        STRATA_TILE_UNROLL
        for (int j = 0; j < 4; ++j) step(wr, x, i + 8 * j, acc[j]);
      }
      for (; i + 8 <= n; i += 8) step(wr, x, i, acc[0]);
      STRATA_TILE_UNROLL
      for (int k = 0; k < R; ++k) {
        STRATA_TILE_UNROLL
        for (int a = 0; a < A; ++a)
          outs[a][r + k] = finish<L>(acc[0][k][a], acc[1][k][a], acc[2][k][a], acc[3][k][a], i, n, wr[k], x[a]);
      }
    }
  };
};

// Three rows per tile for one activation (12 chains); 2 rows x 2 activations for several.
template <typename L>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* x = static_cast<const float*>(act);
  float_rows<Tiles<L>::template Tile, 3, 1>(n, w, stride, nrows, &x, 1, &out);
}

template <typename L>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  float_rows<Tiles<L>::template Tile, 2, 2>(n, w, stride, nrows, reinterpret_cast<const float* const*>(acts), nact,
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

}  // namespace strata::cpu::avx2
