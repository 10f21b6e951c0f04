// NEON dots of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S with Q8_K activations: 16 codebook
// magnitudes per register (two IQ2 entries of 8, or four IQ3 entries of 4; IQ2_S's 10-bit and
// IQ3_S's 9-bit indices formed from qs and qh as the scalar reference forms them), signed with
// byte masks ((g ^ m) − m negates where m = −1: from kIQSignMasks for the 7-bit sign fields, from
// the stored bits themselves for IQ2_S's and IQ3_S's 8 free ones), one 16-lane dot each, the odd
// integer scales applied in int32 and the constant 1/8 (IQ2 formats) or 1/4 (IQ3_XXS) once at the
// end, as the scalar reference does. Each format is a group decoder run by dot_iq_neon.h's one- and
// several-activation loops.
#include <cstring>

#include "strata/cpu/neon/dot_iq_neon.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::kIQ2SGrid;
using quant::kIQ2XSGrid;
using quant::kIQ2XXSGrid;
using quant::kIQ3SGrid;
using quant::kIQ3XXSGrid;
using quant::kIQSignMasks;

// Magnitudes g negated where the byte mask m is −1.
inline int8x16_t with_signs(int8x16_t g, int8x16_t m) { return vsubq_s8(veorq_s8(g, m), m); }

// Magnitudes (lanes 0..7 from lo, 8..15 from hi) with the signs of two 7-bit sign fields.
inline int8x16_t signed_magnitudes(uint64_t lo, uint64_t hi, uint32_t s_lo, uint32_t s_hi) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  const int8x16_t m =
      vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(kIQSignMasks[s_lo]), vcreate_u64(kIQSignMasks[s_hi])));
  return with_signs(g, m);
}

// Magnitudes (lanes 0..7 from lo, 8..15 from hi) with the signs of two stored sign bytes (bit j of
// bits[r] negates lane 8r + j).
inline int8x16_t signed_magnitudes(uint64_t lo, uint64_t hi, const uint8_t* bits) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
  const uint8x16_t lane_bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
  const uint8x16_t m = vtstq_u8(vcombine_u8(vld1_dup_u8(bits), vld1_dup_u8(bits + 1)), lane_bit);
  return with_signs(g, vreinterpretq_s8_u8(m));
}

inline uint64_t iq3_pair(uint8_t a, uint8_t b) { return uint64_t{kIQ3XXSGrid[a]} | (uint64_t{kIQ3XXSGrid[b]} << 32); }

// IQ3_S's grid entries k and k + 1 (9-bit indices) as 8 magnitudes.
inline uint64_t iq3_s_pair(const BlockIQ3_S& b, int k) {
  return uint64_t{kIQ3SGrid[quant::iq3_s_index(b, k)]} | (uint64_t{kIQ3SGrid[quant::iq3_s_index(b, k + 1)]} << 32);
}

// The formats' group decoders (dot_iq_neon.h): group g holds elements 32g .. 32g + 31.
struct Iq2Xxs {
  using Block = BlockIQ2_XXS;
  static constexpr bool kHalfScales = false;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return half(b.d); }
  static IqGroup group(const Block& b, int g) {
    uint32_t aux[2];
    std::memcpy(aux, b.qs + 4 * g, 8);
    return {signed_magnitudes(kIQ2XXSGrid[aux[0] & 0xFF], kIQ2XXSGrid[(aux[0] >> 8) & 0xFF], aux[1] & 127,
                              (aux[1] >> 7) & 127),
            signed_magnitudes(kIQ2XXSGrid[(aux[0] >> 16) & 0xFF], kIQ2XXSGrid[aux[0] >> 24], (aux[1] >> 14) & 127,
                              (aux[1] >> 21) & 127),
            static_cast<int32_t>(2 * (aux[1] >> 28) + 1), 0};
  }
};

// IQ2_XS / IQ2_S: halves 2g and 2g + 1 of a group, one scale each; Fields::half_weights decodes a half.
struct Iq2XsFields {
  using Block = BlockIQ2_XS;
  static int8x16_t half_weights(const Block& b, int h) {
    const uint16_t q0 = b.qs[2 * h], q1 = b.qs[2 * h + 1];
    return signed_magnitudes(kIQ2XSGrid[q0 & 511], kIQ2XSGrid[q1 & 511], q0 >> 9, q1 >> 9);
  }
};
struct Iq2SFields {
  using Block = BlockIQ2_S;
  static int8x16_t half_weights(const Block& b, int h) {
    return signed_magnitudes(kIQ2SGrid[quant::iq2_s_index(b, 2 * h)], kIQ2SGrid[quant::iq2_s_index(b, 2 * h + 1)],
                             b.signs + 2 * h);
  }
};
template <class Fields>
struct Iq2Halves : Fields {
  using Block = typename Fields::Block;
  static constexpr bool kHalfScales = true;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return half(b.d); }
  static IqGroup group(const Block& b, int g) {
    return {Fields::half_weights(b, 2 * g), Fields::half_weights(b, 2 * g + 1), quant::iq_odd_scale(b, 2 * g),
            quant::iq_odd_scale(b, 2 * g + 1)};
  }
};
using Iq2Xs = Iq2Halves<Iq2XsFields>;
using Iq2S = Iq2Halves<Iq2SFields>;

struct Iq3Xxs {
  using Block = BlockIQ3_XXS;
  static constexpr bool kHalfScales = false;
  static constexpr float kScale = 0.25f;
  static float d(const Block& b) { return half(b.d); }
  static IqGroup group(const Block& b, int g) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + quant::kQK_K / 4 + 4 * g, 4);
    const uint8_t* q3 = b.qs + 8 * g;
    return {signed_magnitudes(iq3_pair(q3[0], q3[1]), iq3_pair(q3[2], q3[3]), aux & 127, (aux >> 7) & 127),
            signed_magnitudes(iq3_pair(q3[4], q3[5]), iq3_pair(q3[6], q3[7]), (aux >> 14) & 127, (aux >> 21) & 127),
            static_cast<int32_t>(2 * (aux >> 28) + 1), 0};
  }
};

struct Iq3S {
  using Block = BlockIQ3_S;
  static constexpr bool kHalfScales = false;
  static constexpr float kScale = 1.0f;
  static float d(const Block& b) { return half(b.d); }
  static IqGroup group(const Block& b, int g) {
    const int k = 8 * g;  // the group's first grid entry (4 magnitudes each)
    const uint8_t* signs = b.signs + 4 * g;
    return {signed_magnitudes(iq3_s_pair(b, k), iq3_s_pair(b, k + 2), signs),
            signed_magnitudes(iq3_s_pair(b, k + 4), iq3_s_pair(b, k + 6), signs + 2), quant::iq_odd_scale(b, g), 0};
  }
};

}  // namespace

#define STRATA_NEON_IQ_ROWS(type, F)                                                                               \
  void dot_rows_##type(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) { \
    iq_rows<F>(n, w, stride, nrows, act, out);                                                                     \
  }                                                                                                                \
  void dot_rows_multi_##type(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, \
                             int nact, float* const* outs) {                                                       \
    iq_rows_multi<F>(n, w, stride, nrows, acts, nact, outs);                                                       \
  }
STRATA_NEON_IQ_ROWS(iq2_xxs, Iq2Xxs)
STRATA_NEON_IQ_ROWS(iq2_xs, Iq2Xs)
STRATA_NEON_IQ_ROWS(iq2_s, Iq2S)
STRATA_NEON_IQ_ROWS(iq3_xxs, Iq3Xxs)
STRATA_NEON_IQ_ROWS(iq3_s, Iq3S)
#undef STRATA_NEON_IQ_ROWS

}  // namespace strata::cpu::STRATA_NEON_NS
