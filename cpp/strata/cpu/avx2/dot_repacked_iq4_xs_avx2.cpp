// AVX2 kernel of the repacked IQ4_XS type (cpu/repack/layout.h, IQ4_XS_R16): a 16-row group as two
// halves of 8 rows, one 256-bit register per 4-column step whose 32-bit lane r is row r; the
// activation's 4 bytes of the step are broadcast once for both halves. The nibbles index the
// codebook (int8, −127..113) through vpshufb; maddubs needs an unsigned operand, and a +128 bias
// (as the AVX-512 kernel uses with vpdpbusd) would saturate its int16 pair sums, so the product
// takes |value| against y carrying value's sign (mul_add_epi8: pair sums within 2·127·127 < 2^15).
// One vpmaddwd per step by the rows' scale ls − 32 (in both int16 halves of the lane) gives int32;
// with two activations each step's looked-up quants serve both. Then per row sum += (dy·dx)·isum, multiply and add
// rounded separately (built with -ffp-contract=off): bitwise the plain scalar IQ4_XS dot.
#include <algorithm>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/repacked_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ8_K;
using L = repack::IQ4XSLayout;

// One group (16 rows at grp) against A activations: outs[a][r0 .. r0 + n_valid).
template <int A>
void group(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i values = _mm256_broadcastsi128_si256(loadu128(quant::kIQ4NLValues));
  __m256 acc[A][2];
  for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L::block(b);
    alignas(32) int8_t sc[128];
    unpack6<32>(blk + L::kScales, sc);  // sc[16·g + r] = scale of sub-block g, row r
    __m256i isum[A][2];
    for (int a = 0; a < A; ++a) isum[a][0] = isum[a][1] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {  // sub-block g: chunks 4g .. 4g + 3
      const uint8_t* qs = blk + L::kQs + 256 * g;
      const __m256i scale[2] = {scales_dup(sc + 16 * g), scales_dup(sc + 16 * g + 8)};
      for (int s = 0; s < 4; ++s) {
        for (int h = 0; h < 2; ++h) {
          const __m256i w = loadu256(qs + 64 * s + 32 * h);
          const __m256i lo = _mm256_shuffle_epi8(values, _mm256_and_si256(w, m4));
          const __m256i hi = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4));
          for (int a = 0; a < A; ++a) {
            const int8_t* q8 = y[a][b].qs + 32 * g + 4 * s;
            const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(mul_add_epi8(lo, bcast_word(q8)), scale[h]),
                                               _mm256_madd_epi16(mul_add_epi8(hi, bcast_word(q8 + 16)), scale[h]));
            isum[a][h] = _mm256_add_epi32(isum[a][h], p);
          }
        }
      }
    }
    const __m256 xd[2] = {_mm256_cvtph_ps(loadu128(blk + L::kD)), _mm256_cvtph_ps(loadu128(blk + L::kD + 16))};
    for (int a = 0; a < A; ++a) {
      const __m256 yd = _mm256_set1_ps(y[a][b].d);
      for (int h = 0; h < 2; ++h)
        acc[a][h] = _mm256_add_ps(acc[a][h], _mm256_mul_ps(_mm256_mul_ps(yd, xd[h]), _mm256_cvtepi32_ps(isum[a][h])));
    }
  }
  for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
}

}  // namespace

void dot_rows_iq4_xs_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  repack::for_each_group(w, stride, nrows,
                         [&](const uint8_t* grp, int64_t r, int nv) { group<1>(nb, grp, &y, &out, r, nv); });
}

// Up to two activations per pass over a group (16 ymm registers: more would spill the sums).
void dot_rows_multi_iq4_xs_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                               int nact, float* const* outs) {
  const auto* const* y = reinterpret_cast<const BlockQ8_K* const*>(acts);
  const int64_t nb = n / quant::kQK_K;
  repack::for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
    repack::for_each_act_pass<2>(nact, [&]<int A>(int a) { group<A>(nb, grp, y + a, outs + a, r, nv); });
  });
}

}  // namespace strata::cpu::avx2
