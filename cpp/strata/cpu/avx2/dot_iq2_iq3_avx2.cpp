// AVX2 dots of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S with Q8_K activations. Per 32 weights the
// codebook entries are gathered into one register (4 IQ2 entries of 8 bytes, or 8 IQ3 entries of
// 4; IQ2_S's 10-bit and IQ3_S's 9-bit indices are formed in a register and fetched with vpgatherdq
// / vpgatherdd), the activations take the weights' signs (sign_epi8 with a ±1 byte mask: from
// kIQSignMasks for the 7-bit sign fields, from the stored bits themselves for IQ2_S's and IQ3_S's
// 8 free ones), and maddubs multiplies the unsigned magnitudes with them; the odd integer group
// scales are applied with madd in int32 and the constant 1/8 (IQ2 formats) or 1/4 (IQ3_XXS) once
// at the end, as the scalar reference does. Each format is a group decoder for the shared dot and
// several-activation loops of dot_iq_avx2.h.
#include <cstring>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/dot_iq_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockQ8_K;
using quant::kIQ2SGrid;
using quant::kIQ2XSGrid;
using quant::kIQ2XXSGrid;
using quant::kIQ3SGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

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

}  // namespace

void dot_rows_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2XXS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                            int nact, float* const* outs) {
  iq_rows_multi<IQ2XXS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2XS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                           int nact, float* const* outs) {
  iq_rows_multi<IQ2XS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ2S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ3XXS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                            int nact, float* const* outs) {
  iq_rows_multi<IQ3XXS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ3S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ3S>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
