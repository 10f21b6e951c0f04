// AVX-512 VNNI kernel of the repacked IQ4_XS type (cpu/repack/layout.h, IQ4_XS_R16): 16 rows per
// group, one 512-bit register per 4-column step whose 32-bit lane r is row r. The nibbles index
// the non-linear codebook (int8, −127..113) through one vpshufb of the table biased by +128, so the
// looked-up bytes are unsigned (1..241) and go straight into vpdpbusd against the activation's 4
// bytes of the step (broadcast); each sub-block's chain starts at −128·Σy of its 32 columns (the
// activation's two 16-value bsums), which removes the bias exactly. One vpmulld by the rows' scale
// ls − 32 (the 6-bit codes of all 16 rows unpacked once per super-block) adds the sub-block to
// the super-block's integer sum; then per row sum += (dy·dx)·isum, multiply and add rounded
// separately (built with -ffp-contract=off): the plain scalar IQ4_XS dot's arithmetic, so results
// are bitwise that dot. A GEMV walks one row group at a time (one sequential read); with several
// activations each group's looked-up quants are shared by up to four of them.
#include <algorithm>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockQ8_K;
using L = repack::IQ4XSLayout;

// The codebook + 128 as unsigned bytes (quant::kIQ4NLValues[i] + 128).
alignas(16) constexpr uint8_t kBiasedValues[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                   129, 141, 153, 166, 181, 197, 217, 241};
static_assert(quant::kIQ4NLValues[0] + 128 == kBiasedValues[0] && quant::kIQ4NLValues[15] + 128 == kBiasedValues[15]);

// The 128 6-bit codes packed at p (layout.h) minus 32, as int8: sc[16·g + r] = scale of sub-block g, row r.
inline void unpack_scales(const uint8_t* p, int8_t* sc) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03), k32 = _mm512_set1_epi8(32);
  const __m512i lo = loadu512(p);
  const __m512i hi = _mm512_broadcast_i64x4(loadu256(p + 64));
  const __m512i h0 = _mm512_srlv_epi64(hi, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
  const __m512i h1 = _mm512_srlv_epi64(hi, _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6));
  const __m512i u0 = _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_slli_epi16(_mm512_and_si512(h0, m2), 4));
  const __m512i u1 =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_slli_epi16(_mm512_and_si512(h1, m2), 4));
  _mm512_store_si512(sc, _mm512_sub_epi8(u0, k32));
  _mm512_store_si512(sc + 64, _mm512_sub_epi8(u1, k32));
}

// One group (16 rows at grp) against A activations: outs[a][r0 .. r0 + n_valid).
// pf > 0: each super-block first prefetches the group's bytes pf further on (cpu/prefetch.h).
template <int A>
void group(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid,
           std::size_t pf = 0) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiasedValues)));
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L::block(b);
    if (pf != 0) prefetch_lines(blk + pf, L::kBlockBytes);
    alignas(64) int8_t sc[128];
    unpack_scales(blk + L::kScales, sc);
    // −128 · (the activation's sum over each 32-column sub-block): pairs of its 16-value bsums.
    alignas(16) int16_t bias[A][8];
    for (int a = 0; a < A; ++a) {
      const __m256i bs = loadu256(y[a][b].bsums);
      const __m128i s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      _mm_store_si128(reinterpret_cast<__m128i*>(bias[a]), s);
    }
    __m512i isum[A];
    for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
    for (int g = 0; g < 8; ++g) {  // sub-block g: chunks 4g .. 4g + 3
      const uint8_t* qs = blk + L::kQs + 256 * g;
      __m512i lo[4], hi[4];
      for (int s = 0; s < 4; ++s) {
        const __m512i w = loadu512(qs + 64 * s);
        lo[s] = _mm512_shuffle_epi8(table, _mm512_and_si512(w, m4));
        hi[s] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
      }
      const __m512i scale = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * g)));
      for (int a = 0; a < A; ++a) {
        const int8_t* q8 = y[a][b].qs + 32 * g;
        // Integer sums: the chains' order changes nothing.
        __m512i p0 = _mm512_set1_epi32(-128 * static_cast<int32_t>(bias[a][g])), p1 = _mm512_setzero_si512();
        for (int s = 0; s < 4; ++s) {
          p0 = dpbusd_bcast(p0, lo[s], q8 + 4 * s);
          p1 = dpbusd_bcast(p1, hi[s], q8 + 16 + 4 * s);
        }
        isum[a] = _mm512_add_epi32(isum[a], _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), scale));
      }
    }
    const __m512 xd = _mm512_cvtph_ps(loadu256(blk + L::kD));
    for (int a = 0; a < A; ++a) {
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(y[a][b].d), xd);
      acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[a])));
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

struct IQ4XSGroup {  // for repack::k_rows / k_rows_multi
  template <int A>
  static void run(auto... args) {
    group<A>(args...);
  }
};

}  // namespace

void dot_rows_iq4_xs_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::IQ4_XS_R16, IQ4XSGroup>(n, w, stride, nrows, act, out);
}

void dot_rows_multi_iq4_xs_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                               int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::IQ4_XS_R16, IQ4XSGroup>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx512
