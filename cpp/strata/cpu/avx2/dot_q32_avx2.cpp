// AVX2 dots of the 32-value block formats (Q4_0, Q5_0, Q5_1, IQ4_NL, Q8_0) with Q8_0 activations.
//
// Four weight rows go through the blocks together so each activation block is loaded (and its
// offset term formed) once per four rows; with several activations (dot_rows_multi: a verification
// window, a prefill chunk) 2-4 weight rows x 2-4 activations share each weight block's load and
// unpacking. Per row and block: one 256-bit maddubs over the 32
// weights, madd to int32, one FMA with the block's scale dx·dy. The scales of eight blocks are
// converted at once (F16C) and multiplied by the activation scales, then broadcast from a small
// stack array. Q4_0 / Q5_0 weights are used unsigned (q ∈ [0,15] / [0,31]) and the offset is
// removed in int16 — maddubs(q, y) − maddubs(8 or 16, y) — so no sign trick is needed; Q8_0 keeps
// the sign trick. Q5_1's q ∈ [0,31] goes into maddubs as is; its blocks' d and m (adjacent) are
// converted together as [d, m] pairs and multiplied by the activation scales, the d·dy broadcast
// from the even entries, and the min terms m·dy·Σy are two FMAs per eight blocks with the blocks' Σy
// in the odd lanes (formed once per activation, shared by every row). IQ4_NL's nibbles are looked
// up (pshufb) in the int8 codebook and dotted with the sign trick. Every row is computed with the
// same operations whatever rows share its pass, so a row's result does not depend on how rows are
// grouped.
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ4_NL;
using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ8_0;

// 16 bytes of nibbles -> 32 bytes: low nibbles in the low lane, high nibbles in the high lane.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m256i both = _mm256_broadcastsi128_si256(loadu128(p));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

// Bit 4 of the 32 weights of a Q5_0 / Q5_1 block (qh) over their low nibbles: q ∈ [0,31].
template <typename Block>
inline __m256i load_q5(const Block& b) {
  const __m256i hi = _mm256_and_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(unpack_nibbles(b.qs), hi);
}

// The per-format part: the block's weights in the form maddubs takes (load, shared by every
// activation of a pass) and the int16 pair sums of (weight · activation) for one block. kMin: the
// block has a min (x = d·q + m), whose term m·dy·Σy dot_group adds.
struct Q4_0Ops {
  using Block = BlockQ4_0;
  static constexpr bool kMin = false;
  static __m256i load(const Block& b) { return unpack_nibbles(b.qs); }
  // Offset term shared by every row of the pass: maddubs(8, y).
  static __m256i offset(__m256i y) { return _mm256_maddubs_epi16(_mm256_set1_epi8(8), y); }
  static __m256i pairs(__m256i q, __m256i y, __m256i off) { return _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), off); }
};

struct Q5_0Ops {
  using Block = BlockQ5_0;
  static constexpr bool kMin = false;
  static __m256i load(const Block& b) { return load_q5(b); }
  static __m256i offset(__m256i y) { return _mm256_maddubs_epi16(_mm256_set1_epi8(16), y); }
  static __m256i pairs(__m256i q, __m256i y, __m256i off) { return _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), off); }
};

// q ∈ [0,31] with no offset: maddubs(q, y) is the block's Σ q·y in pairs (|pair| ≤ 2·31·127).
struct Q5_1Ops {
  using Block = BlockQ5_1;
  static constexpr bool kMin = true;
  static __m256i load(const Block& b) { return load_q5(b); }
  static __m256i offset(__m256i) { return _mm256_setzero_si256(); }
  static __m256i pairs(__m256i q, __m256i y, __m256i) { return _mm256_maddubs_epi16(q, y); }
};

// The codebook value of each nibble (pshufb in the 16-entry int8 table, both lanes), then the sign
// trick: no value is 0 and |value| ≤ 127, so |pair| ≤ 2·127·127 < 2^15.
struct IQ4_NLOps {
  using Block = BlockIQ4_NL;
  static constexpr bool kMin = false;
  static __m256i load(const Block& b) {
    const __m256i values = _mm256_broadcastsi128_si256(loadu128(quant::kIQ4NLValues));
    return _mm256_shuffle_epi8(values, unpack_nibbles(b.qs));
  }
  static __m256i offset(__m256i) { return _mm256_setzero_si256(); }
  static __m256i pairs(__m256i q, __m256i y, __m256i) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
  }
};

struct Q8_0Ops {
  using Block = BlockQ8_0;
  static constexpr bool kMin = false;
  // |x| once per block; the sign moves onto each activation (mul_add_epi8's trick, split).
  static __m256i load(const Block& b) { return loadu256(b.qs); }
  static __m256i offset(__m256i) { return _mm256_setzero_si256(); }
  static __m256i pairs(__m256i q, __m256i y, __m256i) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
  }
};

// Eight fp16 scales at a stride of `stride` bytes -> f32.
inline __m256 load_scales8(const uint8_t* p, std::size_t stride) {
  uint16_t h[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&h[k], p + static_cast<std::size_t>(k) * stride, 2);
  return _mm256_cvtph_ps(loadu128(h));
}

// Σy of each of the eight activation blocks at y, as f32 (exact: |Σy| ≤ 32·128), beside the
// [d, m] pairs of load_dm8: block k's Σy in lane 2k + 1 of lo (k < 4) or lane 2k − 7 of hi, 0 in
// the even lanes. maddubs(1, y) per block, then three levels of int16 horizontal adds leave every
// block's sum per 128-bit lane.
struct BlockSums8 {
  __m256 lo, hi;
};
inline BlockSums8 block_sums8(const BlockQ8_0* y) {
  const __m256i ones = _mm256_set1_epi8(1);
  __m256i s[8];
  for (int k = 0; k < 8; ++k) s[k] = _mm256_maddubs_epi16(ones, loadu256(y[k].qs));
  const __m256i s0123 = _mm256_hadd_epi16(_mm256_hadd_epi16(s[0], s[1]), _mm256_hadd_epi16(s[2], s[3]));
  const __m256i s4567 = _mm256_hadd_epi16(_mm256_hadd_epi16(s[4], s[5]), _mm256_hadd_epi16(s[6], s[7]));
  const __m256i lanes = _mm256_hadd_epi16(s0123, s4567);  // per lane: blocks 0..7
  const __m128i sum = _mm_add_epi16(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
  const __m128i z = _mm_setzero_si128();
  return {_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_unpacklo_epi16(z, sum))),
          _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_unpackhi_epi16(z, sum)))};
}

// The d and m of eight Q5_1 blocks (adjacent fp16) at a stride of `stride` bytes: 16 halves
// [d0, m0, d1, m1, ..., d7, m7].
inline __m256i load_dm8(const uint8_t* p, std::size_t stride) {
  uint32_t h[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&h[k], p + static_cast<std::size_t>(k) * stride, 4);
  return loadu256(h);
}

// W weight rows starting at w against A activations y[a], all nb blocks; out[a][r]. Per (row,
// activation) the operations are those of a pass with W = 1, A = 1 (same scale products, same
// FMA order over the blocks, same final sum), so grouping never changes a result.
template <typename Ops, int W, int A>
void dot_group(int64_t nb, const uint8_t* w, std::size_t stride, const BlockQ8_0* const* y, float* const* out,
               int64_t r0) {
  using Block = typename Ops::Block;
  const Block* x[W];
  for (int r = 0; r < W; ++r) x[r] = reinterpret_cast<const Block*>(w + static_cast<std::size_t>(r) * stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[A][W];
  for (int a = 0; a < A; ++a)
    for (int r = 0; r < W; ++r) acc[a][r] = _mm256_setzero_ps();
  // Block k's dx·dy at d[a][r][k], or with a min at d[a][r][2k] (m·dy at 2k + 1).
  constexpr int kStep = Ops::kMin ? 2 : 1;
  alignas(32) float d[A][W][8 * kStep];

  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    if constexpr (Ops::kMin) {
      __m256 dm[W][2];  // [d, m] of blocks 0..3, 4..7
      for (int r = 0; r < W; ++r) {
        const __m256i h = load_dm8(reinterpret_cast<const uint8_t*>(&x[r][b].d), sizeof(Block));
        dm[r][0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
        dm[r][1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
      }
      for (int a = 0; a < A; ++a) {
        const __m256 dy = load_scales8(reinterpret_cast<const uint8_t*>(&y[a][b].d), sizeof(BlockQ8_0));
        const __m256 dy_lo = _mm256_permutevar8x32_ps(dy, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        const __m256 dy_hi = _mm256_permutevar8x32_ps(dy, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
        const BlockSums8 sy = block_sums8(&y[a][b]);
        for (int r = 0; r < W; ++r) {  // the eight blocks' min terms from the odd lanes
          const __m256 lo = _mm256_mul_ps(dm[r][0], dy_lo);
          const __m256 hi = _mm256_mul_ps(dm[r][1], dy_hi);
          _mm256_store_ps(d[a][r], lo);
          _mm256_store_ps(d[a][r] + 8, hi);
          acc[a][r] = _mm256_fmadd_ps(hi, sy.hi, _mm256_fmadd_ps(lo, sy.lo, acc[a][r]));
        }
      }
    } else {
      __m256 dx[W];
      for (int r = 0; r < W; ++r) dx[r] = load_scales8(reinterpret_cast<const uint8_t*>(&x[r][b].d), sizeof(Block));
      for (int a = 0; a < A; ++a) {
        const __m256 dy = load_scales8(reinterpret_cast<const uint8_t*>(&y[a][b].d), sizeof(BlockQ8_0));
        for (int r = 0; r < W; ++r) _mm256_store_ps(d[a][r], _mm256_mul_ps(dx[r], dy));
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m256i yv[A], off[A];
      for (int a = 0; a < A; ++a) {
        yv[a] = loadu256(y[a][b + k].qs);
        off[a] = Ops::offset(yv[a]);
      }
      for (int r = 0; r < W; ++r) {
        const __m256i q = Ops::load(x[r][b + k]);
        for (int a = 0; a < A; ++a) {
          const __m256i p = _mm256_madd_epi16(Ops::pairs(q, yv[a], off[a]), ones);
          acc[a][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[a][r][kStep * k]), _mm256_cvtepi32_ps(p), acc[a][r]);
        }
      }
    }
  }
  for (; b < nb; ++b) {
    for (int a = 0; a < A; ++a) {
      const __m256i yv = loadu256(y[a][b].qs);
      const __m256i off = Ops::offset(yv);
      const float dy = fp16(y[a][b].d);
      [[maybe_unused]] __m256 sy;  // Σy in eight int32 parts
      if constexpr (Ops::kMin)
        sy = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), yv), ones));
      for (int r = 0; r < W; ++r) {
        const __m256i p = _mm256_madd_epi16(Ops::pairs(Ops::load(x[r][b]), yv, off), ones);
        acc[a][r] = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[r][b].d) * dy), _mm256_cvtepi32_ps(p), acc[a][r]);
        if constexpr (Ops::kMin) acc[a][r] = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[r][b].m) * dy), sy, acc[a][r]);
      }
    }
  }
  for (int a = 0; a < A; ++a)
    for (int r = 0; r < W; ++r) out[a][r0 + r] = hsum(acc[a][r]);
}

// Every row of the call in groups of W (then the rest one by one) for A activations.
template <typename Ops, int W, int A>
void rows_acts(int64_t nb, const uint8_t* p, std::size_t stride, int64_t nrows, const BlockQ8_0* const* y,
               float* const* out) {
  int64_t r = 0;
  for (; r + W <= nrows; r += W) dot_group<Ops, W, A>(nb, p + static_cast<std::size_t>(r) * stride, stride, y, out, r);
  for (; r < nrows; ++r) dot_group<Ops, 1, A>(nb, p + static_cast<std::size_t>(r) * stride, stride, y, out, r);
}

template <typename Ops>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4)
    dot_group<Ops, 4, 1>(nb, p + static_cast<std::size_t>(r) * stride, stride, &y, &out, r);
  switch (nrows - r) {
    case 3: dot_group<Ops, 3, 1>(nb, p + static_cast<std::size_t>(r) * stride, stride, &y, &out, r); break;
    case 2: dot_group<Ops, 2, 1>(nb, p + static_cast<std::size_t>(r) * stride, stride, &y, &out, r); break;
    case 1: dot_group<Ops, 1, 1>(nb, p + static_cast<std::size_t>(r) * stride, stride, &y, &out, r); break;
    default: break;
  }
}

// Activations in groups of up to four: 2 weight rows x 4 or 3 activations, 4 x 2.
template <typename Ops>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* const* y = reinterpret_cast<const BlockQ8_0* const*>(acts);
  const int64_t nb = n / quant::kQK32;
  int a = 0;
  for (; nact - a >= 4 && nact - a != 5; a += 4) rows_acts<Ops, 2, 4>(nb, p, stride, nrows, y + a, outs + a);
  switch (nact - a) {
    case 5:
      rows_acts<Ops, 2, 3>(nb, p, stride, nrows, y + a, outs + a);
      rows_acts<Ops, 4, 2>(nb, p, stride, nrows, y + a + 3, outs + a + 3);
      break;
    case 3: rows_acts<Ops, 2, 3>(nb, p, stride, nrows, y + a, outs + a); break;
    case 2: rows_acts<Ops, 4, 2>(nb, p, stride, nrows, y + a, outs + a); break;
    case 1: rows<Ops>(n, w, stride, nrows, y[a], outs[a]); break;
    default: break;
  }
}

}  // namespace

void dot_rows_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q4_0Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q5_0Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_1(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q5_1Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_iq4_nl(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<IQ4_NLOps>(n, w, stride, nrows, act, out);
}
void dot_rows_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q8_0Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q4_0Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q5_0Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q5_1(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q5_1Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_iq4_nl(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                           int nact, float* const* outs) {
  rows_multi<IQ4_NLOps>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q8_0Ops>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
