#pragma once
// Block layouts of the quantized formats, byte-compatible with ggml (ggml-common.h). Scales are
// stored as raw IEEE half bits (uint16_t) and converted with strata/util/fp16.h, never through a
// compiler half type, so the bytes mean the same on every platform.
#include <cstdint>

namespace strata::quant {

inline constexpr int kQK32 = 32;   // Q4_0, Q5_0, Q5_1, Q8_0, IQ4_NL block
inline constexpr int kQK_K = 256;  // super-block of the K-quants and IQ4_XS

// x = d * (q - 8); element j < 16 in the low nibble of qs[j], element j + 16 in its high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK32 / 2];
};

// x = d * (q - 16), q 5 bits: low 4 bits as in Q4_0, bit 4 of element j is bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};

// x = d * q + m, q 5 bits unsigned (0..31): low 4 bits as in Q4_0, bit 4 of element j is bit j of qh.
// llama-quantize writes it for the Q5_K tensors of a Q5_K_M / Q5_K_S mix whose rows are not a multiple
// of 256 wide.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};

// The 5-bit q (0..31) of element j of a Q5_0 / Q5_1 block: its nibble, bit 4 from bit j of qh (the
// block's qh as a little-endian uint32).
template <class Block>
inline int q5_quant(const Block& b, uint32_t qh, int j) {
  const int nibble = j < kQK32 / 2 ? (b.qs[j] & 0xF) : (b.qs[j - kQK32 / 2] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

// x = d * kIQ4NLValues[q], q 4 bits: element j < 16 in the low nibble of qs[j], element j + 16 in its
// high nibble (as Q4_0). llama-quantize's fallback for IQ4_XS tensors whose rows are not a
// multiple of 256 wide, and a file type of its own.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK32 / 2];
};

// x = d * q, q int8. Also the activation form for Q4_0 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL dots.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK32];
};

// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q 2 bits.
// Element 128*h + 32*s + l (h < 2, s < 4, l < 32) is bits 2s..2s+1 of qs[32*h + l].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16: x = d * (sc[g] - 32) * (q - 4 * !hbit), q 2 bits in qs (laid out as Q2_K's),
// hbit bit 4h + s of hmask[l] for element 128h + 32s + l; sc 6 bits packed in 12 bytes
// (q3_k_scale). So q3 runs over -4..3.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 groups of 32: x = d * sc[g] * q - dmin * m[g], q 4 bits, sc/m 6 bits packed in 12 bytes.
// Group 2k is the low nibbles of qs[32k .. 32k+31], group 2k+1 their high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};

// 8 groups of 32 as Q4_K (same scales, mins and low nibbles) plus a fifth bit: element 32g + l
// has bit g of qh[l]. x = d * sc[g] * q - dmin * m[g], q 5 bits.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 groups of 16: x = d * scales[g] * (q - 32), q 6 bits (4 in ql, 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// 8 groups of 32: x = d * (ls[g] - 32) * kIQ4NLValues[q], q 4 bits, ls 6 bits
// (low 4 in scales_l, high 2 in scales_h). Group g is qs[16g .. 16g+15]: low nibbles are
// elements 0..15 of the group, high nibbles elements 16..31.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

// 8 groups of 32, 8 uint16 each (read as two little-endian uint32 a0, a1): the 4 bytes of a0 index
// kIQ2XXSGrid (8 magnitudes each, elements 8l .. 8l+7 of the group); a1 holds four 7-bit sign
// fields (bits 7l .. 7l+6, expanded to 8 by kIQSigns) and, in its top 4 bits, the group scale s.
// x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
};

// 32 runs of 8: qs[k] covers elements 8k .. 8k+7, its low 9 bits index kIQ2XSGrid (8 magnitudes),
// its top 7 bits are sign bits (expanded to 8 by kIQSigns). Elements 16h .. 16h+15 share the scale
// nibble s = nibble h % 2 of scales[h / 2]. x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};

// 32 runs of 8: run k's 10-bit index into kIQ2SGrid (8 magnitudes, elements 8k .. 8k+7) is qs[k]
// plus bits 2 (k % 4) .. 2 (k % 4) + 1 of qh[k / 4] as its top two; signs[k] negates element 8k + j
// where its bit j is set (8 free bits, no parity rule). Elements 16h .. 16h+15 share the scale
// nibble s = nibble h % 2 of scales[h / 2]. x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint8_t signs[kQK_K / 8];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};

// 8 groups of 32: qs[0..63] are indices into kIQ3XXSGrid (4 magnitudes each, 8 per group);
// qs[64 + 4g .. 64 + 4g + 3] is a little-endian uint32 holding four 7-bit sign fields (one per
// 8 elements) and, in its top 4 bits, the group scale s. x = d * (0.5 + s) * 0.5 * grid * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};

// 8 groups of 32, each 4 runs of 8 made of two grid entries: index k (0..63) into kIQ3SGrid (4 odd
// magnitudes 1..15 each, elements 4k .. 4k+3) is qs[k] plus bit k % 8 of qh[k / 8] as its ninth
// bit; signs[r] negates element 8r + j where its bit j is set (8 free bits, no parity rule); group
// g's scale s is nibble g % 2 of scales[g / 2]. x = d * (1 + 2s) * grid * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};

// 8 groups of 32, each 4 runs of 8: run k's 11-bit index into kIQ1SGrid (8 values −1, 0, +1) is
// qs[k] plus bits 3 (k % 4) .. 3 (k % 4) + 2 of qh[k / 4] as its top three; qh[g] also holds group
// g's scale s (bits 12..14) and delta sign (bit 15 set: negative). x = d · (2s + 1) · (grid ± 1/8).
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};

// 32 runs of 8: run k's 11-bit index into kIQ1SGrid is qs[k] plus the low 3 bits of nibble k % 2 of
// qh[k / 2] as its top three; the nibble's bit 3 is the run's delta sign (set: negative). Elements
// 16h .. 16h+15 share the 3-bit scale s at bits 3 (h % 4) .. 3 (h % 4) + 2 of scales[h / 4]; the top
// nibbles of the four scale words make the fp16 d, scales[0]'s the lowest. x = d · (2s + 1) · (grid ± 1/8).
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint16_t scales[kQK_K / 64];
};

// Activation form of the K-quant and IQ dots: x ≈ d * q, bsums[g] = sum of qs[16g .. 16g+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// The IQ4_NL / IQ4_XS non-linear codebook.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockQ8_K) == 292);

// Q4_K's 6-bit scale and min of group j (0..7) from its 12 packed bytes.
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K's signed scale of group j (0..15), already minus 32: low 4 bits are nibble j / 8 of
// scales[j % 8], high 2 bits are bits 2 (j / 4) of scales[8 + j % 4].
inline int q3_k_scale(const uint8_t* s, int j) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0xF;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// The scale nibble n of scale group h of the IQ formats that keep one nibble per group in `scales`,
// low nibble first: IQ2_XS's and IQ2_S's 16-element halves, IQ3_S's 32-element groups.
template <typename Block>
inline int iq_scale_nibble(const Block& b, int h) {
  return (b.scales[h / 2] >> (4 * (h % 2))) & 0xF;
}

// Its odd multiplier 2n + 1: IQ2_XS's and IQ2_S's n stands for (0.5 + n) / 4, so this is 8 times that
// (dots divide by 8 once at the end); IQ3_S's stands for 2n + 1 itself.
template <typename Block>
inline int iq_odd_scale(const Block& b, int h) {
  return 2 * iq_scale_nibble(b, h) + 1;
}

// IQ2_S's 10-bit grid index of run k (0..31).
inline int iq2_s_index(const BlockIQ2_S& b, int k) { return b.qs[k] | (((b.qh[k / 4] >> (2 * (k % 4))) & 3) << 8); }

// IQ3_S's 9-bit grid index k (0..63).
inline int iq3_s_index(const BlockIQ3_S& b, int k) { return b.qs[k] | (((b.qh[k / 8] >> (k % 8)) & 1) << 8); }

// IQ4_XS's signed 6-bit scale of group g (0..7), already minus 32.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int g) {
  const int lo = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
  const int hi = (b.scales_h >> (2 * g)) & 3;
  return (lo | (hi << 4)) - 32;
}

// IQ1_S / IQ1_M: grid value g (−1, 0, +1) stands for g ± kIQ1Delta (ggml's IQ1S_DELTA).
inline constexpr float kIQ1Delta = 0.125f;

// IQ1_S's 11-bit grid index of run k (0..31); the odd multiplier 2s + 1 and delta sign of group g (0..7).
inline int iq1_s_index(const BlockIQ1_S& b, int k) { return b.qs[k] | (((b.qh[k / 4] >> (3 * (k % 4))) & 7) << 8); }
inline int iq1_s_odd_scale(const BlockIQ1_S& b, int g) { return 2 * ((b.qh[g] >> 12) & 7) + 1; }
inline bool iq1_s_delta_negative(const BlockIQ1_S& b, int g) { return (b.qh[g] & 0x8000) != 0; }

// IQ1_M's 11-bit grid index and delta sign of run k (0..31); the odd multiplier 2s + 1 of half h (0..15).
inline int iq1_m_index(const BlockIQ1_M& b, int k) { return b.qs[k] | (((b.qh[k / 2] >> (4 * (k % 2))) & 7) << 8); }
inline bool iq1_m_delta_negative(const BlockIQ1_M& b, int k) { return ((b.qh[k / 2] >> (4 * (k % 2))) & 8) != 0; }
inline int iq1_m_odd_scale(const BlockIQ1_M& b, int h) { return 2 * ((b.scales[h / 4] >> (3 * (h % 4))) & 7) + 1; }

// IQ1_M's fp16 d (its bits), the top nibbles of its four scale words.
inline uint16_t iq1_m_d(const BlockIQ1_M& b) {
  return static_cast<uint16_t>((b.scales[0] >> 12) | ((b.scales[1] >> 8) & 0x00F0) | ((b.scales[2] >> 4) & 0x0F00) |
                               (b.scales[3] & 0xF000));
}

}  // namespace strata::quant
