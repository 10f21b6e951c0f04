// AVX-512 VNNI dots of the 32-value block formats (Q4_0, Q5_0, Q5_1, IQ4_NL, Q8_0) with Q8_0
// activations.
//
// Two blocks per 512-bit register. vpdpbusd multiplies unsigned weight bytes with signed
// activation bytes and adds groups of four into int32 lanes, so the weights are made unsigned
// (Q4_0 q ∈ [0,15], Q5_0 / Q5_1 q ∈ [0,31] as stored; Q8_0 x + 128 by flipping the sign bit;
// IQ4_NL's nibbles looked up with vpshufb in the codebook + 128) and the offset is removed by
// starting each accumulation at −offset·Σy, which is formed once per activation block pair and
// shared by every weight row of the pass. Per row and block pair: one
// dpbusd, one int→f32 conversion, one FMA with the two blocks' scales dx·dy (eight blocks' scales
// converted at once with F16C, multiplied by the activation scales, then spread per pair with
// one permute). All integer parts are exact; the result differs from the scalar path only in the
// f32 accumulation order. Every (row, activation) is computed with the same operations whatever
// rows and activations share its pass (dot_rows_multi == dot_rows, bitwise). Q5_1 has no offset
// but a min: its blocks' d and m (adjacent) are converted together, eight blocks' [d, m] pairs in one
// register, and multiplied by the activation scales, so the pair permute picks d·dy at the even lanes
// and m·dy·Σy is one FMA per eight blocks with the blocks' Σy in the odd lanes (formed once per
// activation, shared by every row).
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockIQ4_NL;
using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ8_0;

// 16 bytes of nibbles of two blocks -> 64 bytes: per block 16 low nibbles then 16 high nibbles.
inline __m512i unpack_nibbles2(const uint8_t* p0, const uint8_t* p1) {
  const __m256i both = _mm256_set_m128i(loadu128(p1), loadu128(p0));
  const __m512i dup = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(both));
  const __m512i shifted = _mm512_srlv_epi64(dup, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
}
inline __m512i unpack_nibbles1(const uint8_t* p) {
  const __m512i dup = _mm512_zextsi256_si512(_mm256_broadcastsi128_si256(loadu128(p)));
  const __m512i shifted = _mm512_srlv_epi64(dup, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 0, 0));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
}

// Per format: the unsigned weights of one or two blocks and the constant whose dpbusd with the
// activations is the offset to remove (0: none). kMin: the block has a min (x = d·q + m), whose
// term m·dy·Σy dot_group adds.
struct Q4_0Ops {
  using Block = BlockQ4_0;
  static constexpr char kBias = 8;
  static constexpr bool kMin = false;
  static __m512i load2(const Block& a, const Block& b) { return unpack_nibbles2(a.qs, b.qs); }
  static __m512i load1(const Block& a) { return unpack_nibbles1(a.qs); }
};

// Q5_0 / Q5_1: bit 4 of element j (bit j of qh) over the low nibbles, q ∈ [0,31].
template <typename B>
struct Q5Bits {
  using Block = B;
  static uint64_t bits(const Block& a) {
    uint32_t h;
    std::memcpy(&h, a.qh, 4);
    return h;
  }
  static __m512i load2(const Block& a, const Block& b) {
    const __mmask64 m = bits(a) | (bits(b) << 32);
    return _mm512_or_si512(unpack_nibbles2(a.qs, b.qs), _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(0x10)));
  }
  static __m512i load1(const Block& a) {
    return _mm512_or_si512(unpack_nibbles1(a.qs), _mm512_maskz_mov_epi8(bits(a), _mm512_set1_epi8(0x10)));
  }
};

struct Q5_0Ops : Q5Bits<BlockQ5_0> {
  static constexpr char kBias = 16;
  static constexpr bool kMin = false;
};

struct Q5_1Ops : Q5Bits<BlockQ5_1> {
  static constexpr char kBias = 0;
  static constexpr bool kMin = true;
};

// The codebook value + 128 of each nibble (vpshufb in the 16-entry table, every 128-bit lane), so
// u ∈ [1, 241]; the 128·Σy is removed as Q8_0's is.
struct IQ4_NLOps {
  using Block = BlockIQ4_NL;
  static constexpr char kBias = static_cast<char>(0x80);
  static constexpr bool kMin = false;
  static __m512i table() {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(loadu128(quant::kIQ4NLValues)),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i load2(const Block& a, const Block& b) {
    return _mm512_shuffle_epi8(table(), unpack_nibbles2(a.qs, b.qs));
  }
  // Zeros above the block, like its activation (load256_z).
  static __m512i load1(const Block& a) {
    return _mm512_maskz_shuffle_epi8(static_cast<__mmask64>(0xFFFFFFFFu), table(), unpack_nibbles1(a.qs));
  }
};

struct Q8_0Ops {
  using Block = BlockQ8_0;
  static constexpr char kBias = static_cast<char>(0x80);  // x + 128 = x ^ 0x80 as unsigned
  static constexpr bool kMin = false;
  static __m512i load2(const Block& a, const Block& b) {
    return _mm512_xor_si512(load2x256(a.qs, b.qs), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i load1(const Block& a) {
    return _mm512_maskz_xor_epi64(0x0F, load256_z(a.qs), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// −Σ bias·y per 4-byte group: the accumulation start that removes the weights' offset.
template <typename Ops>
inline __m512i neg_offset(__m512i y) {
  if constexpr (Ops::kBias == 0) {
    return _mm512_setzero_si512();
  } else {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(Ops::kBias), y));
  }
}

// Σy of each of the eight activation blocks at y, as f32 (exact), block k's in lane 2k + 1 and 0 in
// the even lanes (beside the [d, m] pairs of load_dm8). One dpbusd with ones per block pair leaves
// four int32 parts per block in each of its two 128-bit quarters; unpacks sum them per quarter
// ([pair 0, 1, 2, 3] in quarter j), the quarters of each block are added, and the sums are put in
// place.
inline __m512 block_sums8(const BlockQ8_0* y) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, load2x256(y[2 * k].qs, y[2 * k + 1].qs));
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  const __m512i q = _mm512_shuffle_i64x2(c, c, _MM_SHUFFLE(3, 1, 2, 0));  // quarters 0, 2, 1, 3
  // Blocks 0, 2, 4, 6 then 1, 3, 5, 7.
  const __m256i g = _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 4, 0, 1, 0, 5, 0, 2, 0, 6, 0, 3, 0, 7);
  return _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi32(0xAAAA, idx, _mm512_castsi256_si512(g)));
}

// The d and m of eight Q5_1 blocks (adjacent fp16) at a stride of `stride` bytes -> f32
// [d0, m0, d1, m1, ..., d7, m7].
inline __m512 load_dm8(const uint8_t* p, std::size_t stride) {
  uint32_t h[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&h[k], p + static_cast<std::size_t>(k) * stride, 4);
  return _mm512_cvtph_ps(loadu256(h));
}

// W weight rows starting at w against A activations y[a], all nb blocks; out[a][r0 + r]. Per
// (row, activation) the operations are those of a pass with W = 1, A = 1.
template <typename Ops, int W, int A>
void dot_group(int64_t nb, const uint8_t* w, std::size_t stride, const BlockQ8_0* const* y, float* const* out,
               int64_t r0) {
  using Block = typename Ops::Block;
  const Block* x[W];
  for (int r = 0; r < W; ++r) x[r] = reinterpret_cast<const Block*>(w + static_cast<std::size_t>(r) * stride);
  __m512 acc[A][W];
  for (int a = 0; a < A; ++a)
    for (int r = 0; r < W; ++r) acc[a][r] = _mm512_setzero_ps();
  // Lanes 0..7 take scale 2k, lanes 8..15 scale 2k + 1.
  const __m512i pair_idx[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                               _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                               _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
                               _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};

  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    __m512 d[A][W];
    if constexpr (Ops::kMin) {
      // d[a][r] = [d0·dy0, m0·dy0, ..., d7·dy7, m7·dy7]; the odd lanes times the blocks' Σy are the
      // eight min terms.
      __m512 dm[W];
      for (int r = 0; r < W; ++r) dm[r] = load_dm8(reinterpret_cast<const uint8_t*>(&x[r][b].d), sizeof(Block));
      const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      for (int a = 0; a < A; ++a) {
        const __m512 dy = _mm512_permutexvar_ps(
            dup, _mm512_castps256_ps512(load_scales8(reinterpret_cast<const uint8_t*>(&y[a][b].d), sizeof(BlockQ8_0))));
        const __m512 sy = block_sums8(&y[a][b]);
        for (int r = 0; r < W; ++r) {
          d[a][r] = _mm512_mul_ps(dm[r], dy);
          acc[a][r] = _mm512_fmadd_ps(d[a][r], sy, acc[a][r]);
        }
      }
    } else {
      __m256 dx[W];
      for (int r = 0; r < W; ++r) dx[r] = load_scales8(reinterpret_cast<const uint8_t*>(&x[r][b].d), sizeof(Block));
      for (int a = 0; a < A; ++a) {
        const __m256 dy = load_scales8(reinterpret_cast<const uint8_t*>(&y[a][b].d), sizeof(BlockQ8_0));
        for (int r = 0; r < W; ++r) d[a][r] = _mm512_castps256_ps512(_mm256_mul_ps(dx[r], dy));
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m512i yv[A], off[A];
      for (int a = 0; a < A; ++a) {
        yv[a] = load2x256(y[a][b + 2 * k].qs, y[a][b + 2 * k + 1].qs);
        off[a] = neg_offset<Ops>(yv[a]);
      }
      for (int r = 0; r < W; ++r) {
        const __m512i q = Ops::load2(x[r][b + 2 * k], x[r][b + 2 * k + 1]);
        for (int a = 0; a < A; ++a) {
          const __m512i p = _mm512_dpbusd_epi32(off[a], q, yv[a]);
          // With [d, m] pairs (kMin) block j's d·dy is lane 2j.
          const __m512 s =
              _mm512_permutexvar_ps(Ops::kMin ? _mm512_add_epi32(pair_idx[k], pair_idx[k]) : pair_idx[k], d[a][r]);
          acc[a][r] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc[a][r]);
        }
      }
    }
  }
  for (; b < nb; ++b) {
    for (int a = 0; a < A; ++a) {
      const __m512i yv = load256_z(y[a][b].qs);
      const __m512i off = neg_offset<Ops>(yv);
      const float dy = fp16(y[a][b].d);
      [[maybe_unused]] __m512 sy;  // Σy in sixteen int32 parts (the upper eight 0)
      if constexpr (Ops::kMin)
        sy = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), yv));
      for (int r = 0; r < W; ++r) {
        const __m512i p = _mm512_dpbusd_epi32(off, Ops::load1(x[r][b]), yv);
        acc[a][r] = _mm512_fmadd_ps(_mm512_set1_ps(fp16(x[r][b].d) * dy), _mm512_cvtepi32_ps(p), acc[a][r]);
        if constexpr (Ops::kMin) acc[a][r] = _mm512_fmadd_ps(_mm512_set1_ps(fp16(x[r][b].m) * dy), sy, acc[a][r]);
      }
    }
  }
  for (int a = 0; a < A; ++a)
    for (int r = 0; r < W; ++r) out[a][r0 + r] = hsum(acc[a][r]);
}

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

// Activations in groups of up to four: 2 weight rows x 4 or 3 activations, 4 x 2 (the
// accumulators, activations and offsets stay in the 32 registers).
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

}  // namespace strata::cpu::avx512
