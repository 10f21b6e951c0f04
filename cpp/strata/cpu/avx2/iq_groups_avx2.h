// The group decoders of the IQ formats on x86 (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M),
// shared by the AVX2 dots (dot_iq_avx2.h) and the AVX-512 several-activation kernel
// (avx512/dot_iq_avx512.cpp). F::group(block, g) gives the 32 weights of group g as an IqGroup:
// unsigned magnitudes u, a register whose bytes carry the weights' signs s, and the int16 scale of
// each pair of products (the low 128-bit lane's for the first 16 weights, the high lane's for the
// rest); F::d(block) is the block's float scale and F::kScale the constant the scalar reference
// multiplies by once at the end.
//
// IQ2 / IQ3: the codebook entries are gathered into one register (4 IQ2 entries of 8 bytes, or 8 IQ3
// entries of 4; IQ2_S's 10-bit and IQ3_S's 9-bit indices are formed in a register and fetched with
// vpgatherdq / vpgatherdd), and the signs are ±1 bytes (from kIQSignMasks for the 7-bit sign fields,
// from the stored bits themselves for IQ2_S's and IQ3_S's 8 free ones). IQ1: the 4 grid entries (8
// values −1, 0, +1 each) become the bytes 8·g ± 1 (the delta sign of their group, IQ1_S, or run,
// IQ1_M), which are their own signs; the delta's 1/8 is the constant.
//
// Everything has internal linkage (the AVX-512 file includes this with its own flags).
#pragma once

#include <cstring>

#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::kIQ1SGrid;
using quant::kIQ2SGrid;
using quant::kIQ2XSGrid;
using quant::kIQ2XXSGrid;
using quant::kIQ3SGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

struct IqGroup {
  __m256i u;       // |w| per byte
  __m256i s;       // sign of w per byte (never 0)
  __m256i scales;  // int16 multiplier of each pair of products
};

inline long long i64(uint64_t v) { return static_cast<long long>(v); }

// ±1 per byte: -1 where the weight is negative.
inline __m256i sign_bytes(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3) {
  const __m256i mask =
      _mm256_set_epi64x(i64(kIQSignMasks[s3]), i64(kIQSignMasks[s2]), i64(kIQSignMasks[s1]), i64(kIQSignMasks[s0]));
  return _mm256_or_si256(mask, _mm256_set1_epi8(1));
}

// ±1 per byte from 32 stored sign bits (bit j of byte r negates element 8r + j).
inline __m256i sign_bytes(const uint8_t* bits) {
  return _mm256_or_si256(bytes_from_bits_32(bits), _mm256_set1_epi8(1));
}

// The 8 IQ3_S grid entries of group g: indices qs[8g + k] with bit k of qh[g] as their ninth bit.
inline __m256i iq3_s_grid(const BlockIQ3_S& b, int g) {
  const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * g)));
  const __m256i high = _mm256_and_si256(
      _mm256_sllv_epi32(_mm256_set1_epi32(b.qh[g]), _mm256_set_epi32(1, 2, 3, 4, 5, 6, 7, 8)), _mm256_set1_epi32(256));
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(kIQ3SGrid), _mm256_or_si256(low, high), 4);
}

// Group g of IQ2_XXS: 4 grid entries (bytes of qs[4g .. 4g + 1]), four 7-bit sign fields and the
// scale in the top 4 bits of the group's second word.
struct IQ2XXS {
  using Block = BlockIQ2_XXS;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return fp16(b.d); }
  static IqGroup group(const Block& b, int g) {
    uint32_t aux[2];
    std::memcpy(aux, b.qs + 4 * g, 8);
    const uint8_t* idx = reinterpret_cast<const uint8_t*>(aux);
    return {_mm256_set_epi64x(i64(kIQ2XXSGrid[idx[3]]), i64(kIQ2XXSGrid[idx[2]]), i64(kIQ2XXSGrid[idx[1]]),
                              i64(kIQ2XXSGrid[idx[0]])),
            sign_bytes(aux[1] & 127, (aux[1] >> 7) & 127, (aux[1] >> 14) & 127, (aux[1] >> 21) & 127),
            _mm256_set1_epi16(static_cast<short>(2 * (aux[1] >> 28) + 1))};
  }
};

// Group g's 4 IQ2_XS grid entries (low 9 bits of qs) and the ±1 bytes of its sign fields (top 7).
struct IQ2XSFields {
  using Block = BlockIQ2_XS;
  static __m256i grid(const Block& b, int g) {
    const uint16_t* q2 = b.qs + 4 * g;
    return _mm256_set_epi64x(i64(kIQ2XSGrid[q2[3] & 511]), i64(kIQ2XSGrid[q2[2] & 511]), i64(kIQ2XSGrid[q2[1] & 511]),
                             i64(kIQ2XSGrid[q2[0] & 511]));
  }
  static __m256i signs(const Block& b, int g) {
    const uint16_t* q2 = b.qs + 4 * g;
    return sign_bytes(q2[0] >> 9, q2[1] >> 9, q2[2] >> 9, q2[3] >> 9);
  }
};

// Group g's 4 IQ2_S grid entries (10-bit indices: qs[4g + l] and bits 2l, 2l + 1 of qh[g] on top)
// and the ±1 bytes of its 32 stored sign bits.
struct IQ2SFields {
  using Block = BlockIQ2_S;
  static __m256i grid(const Block& b, int g) {
    uint32_t low4;
    std::memcpy(&low4, b.qs + 4 * g, 4);
    const __m128i low = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(low4)));
    const __m128i high =
        _mm_and_si128(_mm_sllv_epi32(_mm_set1_epi32(b.qh[g]), _mm_set_epi32(2, 4, 6, 8)), _mm_set1_epi32(0x300));
    return _mm256_i32gather_epi64(reinterpret_cast<const long long*>(kIQ2SGrid), _mm_or_si128(low, high), 8);
  }
  static __m256i signs(const Block& b, int g) { return sign_bytes(b.signs + 4 * g); }
};

// IQ2_XS and IQ2_S: a scale nibble per 16 weights, so group g's two halves (one per 128-bit lane)
// take nibbles 2g and 2g + 1.
template <class Fields>
struct IQ2Halves {
  using Block = typename Fields::Block;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return fp16(b.d); }
  static IqGroup group(const Block& b, int g) {
    const short ls1 = static_cast<short>(quant::iq_odd_scale(b, 2 * g));
    const short ls2 = static_cast<short>(quant::iq_odd_scale(b, 2 * g + 1));
    return {Fields::grid(b, g), Fields::signs(b, g), _mm256_set_m128i(_mm_set1_epi16(ls2), _mm_set1_epi16(ls1))};
  }
};
using IQ2XS = IQ2Halves<IQ2XSFields>;
using IQ2S = IQ2Halves<IQ2SFields>;

// Group g of IQ3_XXS: 8 grid entries of 4 bytes (qs[8g .. 8g + 7]) and, in the word after the 64
// index bytes, four 7-bit sign fields and the scale in the top 4 bits.
struct IQ3XXS {
  using Block = BlockIQ3_XXS;
  static constexpr float kScale = 0.25f;
  static float d(const Block& b) { return fp16(b.d); }
  static IqGroup group(const Block& b, int g) {
    const uint8_t* q3 = b.qs + 8 * g;
    uint32_t aux;
    std::memcpy(&aux, b.qs + quant::kQK_K / 4 + 4 * g, 4);
    return {_mm256_set_epi32(static_cast<int>(kIQ3XXSGrid[q3[7]]), static_cast<int>(kIQ3XXSGrid[q3[6]]),
                             static_cast<int>(kIQ3XXSGrid[q3[5]]), static_cast<int>(kIQ3XXSGrid[q3[4]]),
                             static_cast<int>(kIQ3XXSGrid[q3[3]]), static_cast<int>(kIQ3XXSGrid[q3[2]]),
                             static_cast<int>(kIQ3XXSGrid[q3[1]]), static_cast<int>(kIQ3XXSGrid[q3[0]])),
            sign_bytes(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127),
            _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1))};
  }
};

struct IQ3S {
  using Block = BlockIQ3_S;
  static constexpr float kScale = 1.0f;  // 1.0f · x is x: the scalar reference multiplies by nothing
  static float d(const Block& b) { return fp16(b.d); }
  static IqGroup group(const Block& b, int g) {
    return {iq3_s_grid(b, g), sign_bytes(b.signs + 4 * g),
            _mm256_set1_epi16(static_cast<short>(quant::iq_odd_scale(b, g)))};
  }
};

// 8 · grid + delta, bytewise (|.| ≤ 9), as the shared loops' magnitude and sign registers (the
// weights are never 0).
inline IqGroup iq1_weights(__m256i grid, __m256i delta, __m256i scales) {
  const __m256i w = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta);
  return {_mm256_sign_epi8(w, w), w, scales};
}

// The grid entries of 4 runs: index r is qs[r] plus bits shift_r .. shift_r + 2 of `high` as its top
// three (one vpgatherdq; the shifts in r order, run 0 in the low lane).
inline __m256i iq1_grid(const uint8_t* qs, uint32_t high, __m128i shifts) {
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
    const __m256i grid = iq1_grid(b.qs + 4 * g, b.qh[g], _mm_set_epi32(9, 6, 3, 0));
    const int sign = 1 - 2 * static_cast<int>(quant::iq1_s_delta_negative(b, g));  // no branch: the bit is random
    return iq1_weights(grid, _mm256_set1_epi8(static_cast<char>(sign)),
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
    const __m256i grid = iq1_grid(b.qs + 4 * g, nibbles, _mm_set_epi32(12, 8, 4, 0));
    const __m256i bit = _mm256_set_epi64x(0x8000, 0x800, 0x80, 0x8);
    const __m256i negative = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(nibbles), bit), bit);
    const __m256i delta = _mm256_or_si256(negative, _mm256_set1_epi8(1));
    return iq1_weights(grid, delta,
                       _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g + 1))),
                                        _mm_set1_epi16(static_cast<short>(quant::iq1_m_odd_scale(b, 2 * g)))));
  }
};

}  // namespace
}  // namespace strata::cpu::avx2
