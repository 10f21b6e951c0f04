// AVX2 dots of IQ1_S and IQ1_M with Q8_K activations. Per 32 weights the 4 grid entries (8 values
// −1, 0, +1 each) are gathered into one register and turned into the bytes 8·g ± 1 (the delta sign
// of their group, IQ1_S, or run, IQ1_M), so one maddubs (sign trick: |w| times q8 with w's sign)
// forms 8·Σ g·q8 ± Σq8 per pair of weights; the odd integer scales are applied with madd in int32
// and the delta's 1/8 once at the end: the same integer sums as the scalar reference. Both formats are
// group decoders for the shared dot and several-activation loops of dot_iq_avx2.h.
#include <cstring>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/dot_iq_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockQ8_K;
using quant::kIQ1SGrid;

// 8 · grid + delta, bytewise (|.| ≤ 9), as the shared loops' magnitude and sign registers (the
// weights are never 0).
inline IqGroup weights(__m256i grid, __m256i delta, __m256i scales) {
  const __m256i w = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta);
  return {_mm256_sign_epi8(w, w), w, scales};
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
struct IQ1S {
  using Block = BlockIQ1_S;
  static constexpr float kScale = 0.125f;  // the delta's 1/8
  static float d(const Block& b) { return fp16(b.d); }
  static IqGroup group(const Block& b, int g) {
    const __m256i grid = gather_grid(b.qs + 4 * g, b.qh[g], _mm_set_epi32(9, 6, 3, 0));
    const int sign = 1 - 2 * static_cast<int>(quant::iq1_s_delta_negative(b, g));  // no branch: the bit is random
    return weights(grid, _mm256_set1_epi8(static_cast<char>(sign)),
                   _mm256_set1_epi16(static_cast<short>(quant::iq1_s_odd_scale(b, g))));
  }
};

// IQ1_M group g: runs 4g .. 4g + 3, a delta sign each; halves 2g, 2g + 1 (one per 128-bit lane)
// have a scale each.
struct IQ1M {
  using Block = BlockIQ1_M;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return fp16(quant::iq1_m_d(b)); }
  static IqGroup group(const Block& b, int g) {
    // Run 4g + r's nibble is nibble r of qh[2g], qh[2g + 1] read as one little-endian word: its low 3
    // bits top the grid index, its bit 3 is the delta sign (−1 bytes where set, else +1; compared, not
    // branched on: the bits are random).
    uint16_t nibbles;
    std::memcpy(&nibbles, b.qh + 2 * g, 2);
    const __m256i grid = gather_grid(b.qs + 4 * g, nibbles, _mm_set_epi32(12, 8, 4, 0));
    const __m256i bit = _mm256_set_epi64x(0x8000, 0x800, 0x80, 0x8);
    const __m256i negative = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(nibbles), bit), bit);
    const __m256i delta = _mm256_or_si256(negative, _mm256_set1_epi8(1));
    return weights(grid, delta,
                   _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g + 1))),
                                    _mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g)))));
  }
};

}  // namespace

void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ1S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ1S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ1M>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ1M>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
