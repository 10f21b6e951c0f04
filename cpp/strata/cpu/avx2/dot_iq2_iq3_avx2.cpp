// AVX2 dots of IQ2_XXS, IQ2_XS and IQ3_XXS with Q8_K activations. Per 32 weights the codebook
// entries are gathered into one register (4 IQ2_XXS / IQ2_XS entries of 8 bytes, or 8 IQ3_XXS
// entries of 4), the activations take the weights' signs (sign_epi8 with a ±1 byte mask from
// kIQSignMasks), and maddubs multiplies the unsigned magnitudes with them; the odd integer group
// scales are applied with madd in int32 and the constant 1/8 (IQ2_XXS, IQ2_XS) or 1/4 (IQ3_XXS)
// once at the end, as the scalar reference does.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kIQ2XSGrid;
using quant::kIQ2XXSGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

inline long long i64(uint64_t v) { return static_cast<long long>(v); }

// ±1 per byte: -1 where the weight is negative.
inline __m256i sign_bytes(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3) {
  const __m256i mask =
      _mm256_set_epi64x(i64(kIQSignMasks[s3]), i64(kIQSignMasks[s2]), i64(kIQSignMasks[s1]), i64(kIQSignMasks[s0]));
  return _mm256_or_si256(mask, _mm256_set1_epi8(1));
}

float dot_iq2_xxs(int64_t nb, const BlockIQ2_XXS* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint16_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g, q2 += 4, q8 += 32) {
      uint32_t aux[2];
      std::memcpy(aux, q2, 8);
      const uint8_t* idx = reinterpret_cast<const uint8_t*>(aux);
      const __m256i grid = _mm256_set_epi64x(i64(kIQ2XXSGrid[idx[3]]), i64(kIQ2XXSGrid[idx[2]]),
                                             i64(kIQ2XXSGrid[idx[1]]), i64(kIQ2XXSGrid[idx[0]]));
      const __m256i signs = sign_bytes(aux[1] & 127, (aux[1] >> 7) & 127, (aux[1] >> 14) & 127, (aux[1] >> 21) & 127);
      const __m256i p = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(loadu256(q8), signs));
      const short ls = static_cast<short>(2 * (aux[1] >> 28) + 1);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(ls)));
    }
    const float d = fp16(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum(acc);
}

float dot_iq2_xs(int64_t nb, const BlockIQ2_XS* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint16_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g, q2 += 4, q8 += 32) {
      const __m256i grid = _mm256_set_epi64x(i64(kIQ2XSGrid[q2[3] & 511]), i64(kIQ2XSGrid[q2[2] & 511]),
                                             i64(kIQ2XSGrid[q2[1] & 511]), i64(kIQ2XSGrid[q2[0] & 511]));
      const __m256i signs = sign_bytes(q2[0] >> 9, q2[1] >> 9, q2[2] >> 9, q2[3] >> 9);
      const __m256i p = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(loadu256(q8), signs));
      const short ls1 = static_cast<short>(2 * (x[i].scales[g] & 0xF) + 1);
      const short ls2 = static_cast<short>(2 * (x[i].scales[g] >> 4) + 1);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16(ls2), _mm_set1_epi16(ls1))));
    }
    const float d = fp16(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum(acc);
}

float dot_iq3_xxs(int64_t nb, const BlockIQ3_XXS* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q3 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g, q3 += 8, q8 += 32) {
      uint32_t aux;
      std::memcpy(&aux, x[i].qs + quant::kQK_K / 4 + 4 * g, 4);
      const __m256i grid = _mm256_set_epi32(static_cast<int>(kIQ3XXSGrid[q3[7]]), static_cast<int>(kIQ3XXSGrid[q3[6]]),
                                            static_cast<int>(kIQ3XXSGrid[q3[5]]), static_cast<int>(kIQ3XXSGrid[q3[4]]),
                                            static_cast<int>(kIQ3XXSGrid[q3[3]]), static_cast<int>(kIQ3XXSGrid[q3[2]]),
                                            static_cast<int>(kIQ3XXSGrid[q3[1]]), static_cast<int>(kIQ3XXSGrid[q3[0]]));
      const __m256i signs = sign_bytes(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
      const __m256i p = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(loadu256(q8), signs));
      const short ls = static_cast<short>(2 * (aux >> 28) + 1);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(ls)));
    }
    const float d = fp16(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.25f * hsum(acc);
}

}  // namespace

void dot_rows_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XXS, dot_iq2_xxs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XS, dot_iq2_xs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_XXS, dot_iq3_xxs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx2
