// AVX2 kernels of the repacked types (cpu/repack/layout.h): a 16-row group as two halves of 8
// rows, one 256-bit register per 4-column step whose 32-bit lane r is row r; the activation's 4
// bytes of the step are broadcast. Q4_0_R16: maddubs of the unsigned nibbles, the int16 pair sums
// of all eight steps added in int16 (8 · 2 · 15 · 127 < 2^15), one madd to int32, minus 8·Σy.
// Q5_0_R16: the same with each step's fifth bits expanded from its mask to 0 / 16 per byte (q up to
// 31: four steps' pair sums fit int16, 4 · 2 · 31 · 127 < 2^15, so the low and the high nibbles' steps
// take one madd each), minus 16·Σy.
// Q5_1_R16: Q5_0_R16's sums with q unsigned (no offset) plus m·dy·Σy per block after the d term.
// IQ4_NL_R16: each step's nibbles looked up in the codebook (pshufb), then as Q8_0_R16 (|v| <= 127).
// Q8_0_R16: the stored x + 128 flipped back to x, then maddubs(|x|, sign(y, x)) and madd per step.
// Then sum += sumi · (dx·dy) with the multiply and the add rounded separately (built with
// -ffp-contract=off): bitwise the scalar kernel's result.
#include <algorithm>
#include <cstring>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/repacked_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/act_terms.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ8_0;

// Σ of the 32 activation bytes of a block.
inline int block_sum(const BlockQ8_0& y) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), loadu256(y.qs));
  return hsum_i32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

// The int32 block sums of one half (8 rows) of a group's block against A activations (bc[a]: activation a's
// eight broadcast 4-byte steps): each 32-byte load of weights is unpacked (Q4_0) or sign-split (Q8_0) once
// for all A, so a verification window's or a prefill chunk's second row costs its multiplies only.
struct Q4Ops {
  using L = repack::Q4Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q4_0_R16;
  static constexpr int kBias = 8;
  template <int A>
  static void half_sums(const uint8_t* qs, int h, const __m256i (*bc)[8], const int32_t* start, __m256i* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i p[A];
    for (int a = 0; a < A; ++a) p[a] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i w = loadu256(qs + 64 * c + 32 * h);
      const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
      for (int a = 0; a < A; ++a) {
        p[a] = _mm256_add_epi16(p[a], _mm256_maddubs_epi16(lo, bc[a][c]));
        p[a] = _mm256_add_epi16(p[a], _mm256_maddubs_epi16(hi, bc[a][c + 4]));
      }
    }
    for (int a = 0; a < A; ++a)
      out[a] = _mm256_add_epi32(_mm256_madd_epi16(p[a], _mm256_set1_epi16(1)), _mm256_set1_epi32(start[a]));
  }
};

struct Q5Ops {
  using L = repack::Q5Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q5_0_R16;
  static constexpr int kBias = 16;
  // Rows 8h .. 8h + 7 of step s: byte i is 16 where bit 32h + i of the step's mask is set (layout.h),
  // else 0. The mask's four bytes are spread eight to a byte (byte i takes mask byte i / 8) and tested
  // against bit i % 8.
  static __m256i fifth_bits(const uint8_t* qs, int s, int h) {
    int32_t m;
    std::memcpy(&m, qs + repack::kQ5MaskOff + 8 * s + 4 * h, 4);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(m), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
  }
  template <int A>
  static void half_sums(const uint8_t* qs, int h, const __m256i (*bc)[8], const int32_t* start, __m256i* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256i plo[A], phi[A];
    for (int a = 0; a < A; ++a) plo[a] = phi[a] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i w = loadu256(qs + 64 * c + 32 * h);
      const __m256i lo = _mm256_add_epi8(_mm256_and_si256(w, m4), fifth_bits(qs, c, h));
      const __m256i hi = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(w, 4), m4), fifth_bits(qs, c + 4, h));
      for (int a = 0; a < A; ++a) {
        plo[a] = _mm256_add_epi16(plo[a], _mm256_maddubs_epi16(lo, bc[a][c]));
        phi[a] = _mm256_add_epi16(phi[a], _mm256_maddubs_epi16(hi, bc[a][c + 4]));
      }
    }
    for (int a = 0; a < A; ++a)
      out[a] = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(plo[a], ones), _mm256_madd_epi16(phi[a], ones)),
                                _mm256_set1_epi32(start[a]));
  }
};

// kBias = 1 only makes the call's activation terms hold −Σy (act_terms.h): the chains start at 0 (kMin) and the
// min term negates it.
struct Q51Ops : Q5Ops {
  using L = repack::Q51Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q5_1_R16;
  static constexpr int kBias = 1;
  static constexpr bool kMin = true;
};
template <typename Ops>
constexpr bool kHasMin = requires { Ops::kMin; };

struct IQ4NLOps {
  using L = repack::Q4Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::IQ4_NL_R16;
  static constexpr int kBias = 0;  // the codebook values are signed: no Σy term
  template <int A>
  static void half_sums(const uint8_t* qs, int h, const __m256i (*bc)[8], const int32_t*, __m256i* out) {
    const __m256i table = _mm256_broadcastsi128_si256(loadu128(quant::kIQ4NLValues));
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (int a = 0; a < A; ++a) out[a] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i w = loadu256(qs + 64 * c + 32 * h);
      const __m256i v[2] = {_mm256_shuffle_epi8(table, _mm256_and_si256(w, m4)),
                            _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4))};
      for (int k = 0; k < 2; ++k) {
        const __m256i av = _mm256_sign_epi8(v[k], v[k]);
        for (int a = 0; a < A; ++a) {
          const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(bc[a][c + 4 * k], v[k]));
          out[a] = _mm256_add_epi32(out[a], _mm256_madd_epi16(p, ones));
        }
      }
    }
  }
};

struct Q8Ops {
  using L = repack::Q8Layout;
  static constexpr quant::GGMLType kType = quant::GGMLType::Q8_0_R16;
  static constexpr int kBias = 0;  // x + 128 flipped back: no Σy term
  template <int A>
  static void half_sums(const uint8_t* qs, int h, const __m256i (*bc)[8], const int32_t*, __m256i* out) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int a = 0; a < A; ++a) out[a] = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i x = _mm256_xor_si256(loadu256(qs + 64 * k + 32 * h), flip);
      const __m256i ax = _mm256_sign_epi8(x, x);
      for (int a = 0; a < A; ++a) {
        const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(bc[a][k], x));
        out[a] = _mm256_add_epi32(out[a], _mm256_madd_epi16(p, ones));
      }
    }
  }
};

// The activation terms (−8·Σy for Q4_0, −16·Σy for Q5_0, dy) formed once per call: cpu/repack/act_terms.h.
using ActTerms = repack::ActTerms<block_sum, fp16>;
using repack::kPrepBlocks;

// One group against A activations: outs[a][r0 .. r0 + n_valid). With pf > 0 each half block first
// prefetches its share of the bytes pf further on (cpu/prefetch.h; the decode GEMV passes it): a few lines at
// a time, as the K-quant kernels (on a Zen 3, Q8_0 decode 0-5 % faster than a whole block pair at once).
template <typename Ops, int A>
void group_acts(int64_t nb, const uint8_t* grp, const ActTerms* t, float* const* outs, int64_t r0, int n_valid,
                std::size_t pf = 0) {
  using L = typename Ops::L;
  __m256 acc[A][2];
  for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* d = grp + L::d_off(b, nb);
    const uint8_t* qs = grp + L::qs_off(b, nb);
    const __m256 dw[2] = {_mm256_cvtph_ps(loadu128(d)), _mm256_cvtph_ps(loadu128(d + 16))};
    __m256i bc[A][8];
    int32_t start[A];               // the chains' start
    [[maybe_unused]] __m256 sy[A];  // with a min: Σy (kBias 1 makes start_at −Σy), the chains from 0
    __m256 dy[A];
    for (int a = 0; a < A; ++a) {
      const BlockQ8_0& yb = t[a].y[b];
      for (int k = 0; k < 4; ++k) {
        bc[a][k] = bcast_word(yb.qs + 4 * k);
        bc[a][k + 4] = bcast_word(yb.qs + 16 + 4 * k);
      }
      start[a] = t[a].start_at(b);
      if constexpr (kHasMin<Ops>) {
        sy[a] = _mm256_set1_ps(static_cast<float>(-start[a]));
        start[a] = 0;
      }
      dy[a] = _mm256_set1_ps(t[a].dy_at(b));
    }
    for (int h = 0; h < 2; ++h) {
      if (pf != 0)
        prefetch_lines(grp + static_cast<std::size_t>(2 * b + h) * (L::kBlockBytes / 2) + pf, L::kBlockBytes / 2);
      __m256i isum[A];
      Ops::template half_sums<A>(qs, h, bc, start, isum);
      for (int a = 0; a < A; ++a)
        acc[a][h] = _mm256_add_ps(acc[a][h], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[a]), _mm256_mul_ps(dw[h], dy[a])));
      if constexpr (kHasMin<Ops>) {
        const __m256 m = _mm256_cvtph_ps(loadu128(qs + repack::kQ51MinOff + 16 * h));
        for (int a = 0; a < A; ++a) acc[a][h] = _mm256_add_ps(acc[a][h], _mm256_mul_ps(sy[a], _mm256_mul_ps(m, dy[a])));
      }
    }
  }
  for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
}

template <typename Ops>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  const auto* const* y = reinterpret_cast<const BlockQ8_0* const*>(acts);
  const int64_t nb = n / quant::kQK32;
  // Only a group's first pass streams its weights from memory; later passes find them in L1.
  const std::size_t pf = gemv_prefetch_bytes(Ops::kType);
  ActTerms::for_each_chunk(y, nact, nb, nrows, Ops::kBias, [&](const ActTerms* t, int c0, int nc) {
    repack::for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
      repack::for_each_act_pass<2>(
          nc, [&]<int A>(int a) { group_acts<Ops, A>(nb, grp, t + a, outs + c0 + a, r, nv, a == 0 ? pf : 0); });
    });
  });
}

template <typename Ops>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const int64_t nb = n / quant::kQK32;
  const std::size_t pf = gemv_prefetch_bytes(Ops::kType);
  alignas(32) int32_t start[kPrepBlocks];
  alignas(32) float dy[kPrepBlocks];
  const ActTerms t = ActTerms::make(static_cast<const BlockQ8_0*>(act), nb, nrows, Ops::kBias, start, dy);
  repack::for_each_group(w, stride, nrows, [&](const uint8_t* grp, int64_t r, int nv) {
    group_acts<Ops, 1>(nb, grp, &t, &out, r, nv, pf);
  });
}

}  // namespace

void dot_rows_q4_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q4Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q5Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q5_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q5Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q8_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q8Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_1_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q51Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q5_1_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q51Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq4_nl_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<IQ4NLOps>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq4_nl_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                               int nact, float* const* outs) {
  rows_multi<IQ4NLOps>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q4_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q4Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q8_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  rows_multi<Q8Ops>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
