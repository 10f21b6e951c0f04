// AVX2 dots of IQ1_S and IQ1_M with Q8_K activations. Per 32 weights the 4 grid entries (8 values
// −1, 0, +1 each) are gathered into one register and turned into the bytes 8·g ± 1 (the delta sign
// of their group, IQ1_S, or run, IQ1_M), so one maddubs (sign trick: |w| times q8 with w's sign)
// forms 8·Σ g·q8 ± Σq8 per pair of weights; the odd integer scales are applied with madd in int32
// and the delta's 1/8 once at the end: the same integer sums as the scalar reference.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockQ8_K;
using quant::kIQ1SGrid;

// 8 · grid + delta, bytewise (|.| ≤ 9).
inline __m256i weights(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta);
}

// The grid entries of 4 runs: index r is qs[r] plus bits shift_r .. shift_r + 2 of `high` as its top
// three (one vpgatherdq; the shifts in r order, run 0 in the low lane).
inline __m256i gather_grid(const uint8_t* qs, uint32_t high, __m128i shifts) {
  uint32_t low4;
  std::memcpy(&low4, qs, 4);
  const __m128i low = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(low4)));
  const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(high)), shifts), _mm_set1_epi32(7));
  return _mm256_i32gather_epi64(reinterpret_cast<const long long*>(kIQ1SGrid),
                                _mm_or_si128(low, _mm_slli_epi32(top, 8)), 8);
}

// IQ1_S group g: 4 runs of 8 sharing one scale and one delta sign (qh[g]: the runs' top index bits at
// 0, 3, 6, 9, the scale, the sign).
inline __m256i iq1_s_weights(const BlockIQ1_S& b, int g) {
  const __m256i grid = gather_grid(b.qs + 4 * g, b.qh[g], _mm_set_epi32(9, 6, 3, 0));
  const int sign = 1 - 2 * static_cast<int>(quant::iq1_s_delta_negative(b, g));  // no branch: the bit is random
  return weights(grid, _mm256_set1_epi8(static_cast<char>(sign)));
}
inline __m256i iq1_s_scales(const BlockIQ1_S& b, int g) {
  return _mm256_set1_epi16(static_cast<short>(quant::iq1_s_odd_scale(b, g)));
}
inline float iq1_s_d(const BlockIQ1_S& b) { return fp16(b.d); }

// IQ1_M group g: runs 4g .. 4g + 3, a delta sign each; halves 2g, 2g + 1 (one per 128-bit lane)
// have a scale each.
inline __m256i iq1_m_weights(const BlockIQ1_M& b, int g) {
  // Run 4g + r's nibble is nibble r of qh[2g], qh[2g + 1] read as one little-endian word: its low 3
  // bits top the grid index, its bit 3 is the delta sign (−1 bytes where set, else +1; compared, not
  // branched on: the bits are random).
  uint16_t nibbles;
  std::memcpy(&nibbles, b.qh + 2 * g, 2);
  const __m256i grid = gather_grid(b.qs + 4 * g, nibbles, _mm_set_epi32(12, 8, 4, 0));
  const __m256i bit = _mm256_set_epi64x(0x8000, 0x800, 0x80, 0x8);
  const __m256i negative = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(nibbles), bit), bit);
  const __m256i delta = _mm256_or_si256(negative, _mm256_set1_epi8(1));
  return weights(grid, delta);
}
inline __m256i iq1_m_scales(const BlockIQ1_M& b, int g) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g + 1))),
                          _mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g))));
}
inline float iq1_m_d(const BlockIQ1_M& b) { return fp16(quant::iq1_m_d(b)); }

template <typename Block, __m256i (*Weights)(const Block&, int), __m256i (*Scales)(const Block&, int),
          float (*D)(const Block&)>
float dot_iq1(int64_t nb, const Block* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g, q8 += 32) {
      const __m256i p = mul_add_epi8(Weights(x[i], g), loadu256(q8));  // |.| ≤ 2·9·127
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, Scales(x[i], g)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(D(x[i]) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum(acc);
}

}  // namespace

void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_S, dot_iq1<BlockIQ1_S, iq1_s_weights, iq1_s_scales, iq1_s_d>>(n, w, stride, nrows, act, out);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_M, dot_iq1<BlockIQ1_M, iq1_m_weights, iq1_m_scales, iq1_m_d>>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx2
