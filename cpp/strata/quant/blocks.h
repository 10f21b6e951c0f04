#pragma once
// Block layouts of the quantized formats, byte-compatible with ggml (ggml-common.h). Scales are
// stored as raw IEEE half bits (uint16_t) and converted with strata/util/fp16.h, never through a
// compiler half type, so the bytes mean the same on every platform.
#include <cstdint>

namespace strata::quant {

inline constexpr int kQK32 = 32;   // Q4_0, Q5_0, Q8_0 block
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

// x = d * q, q int8. Also the activation form for Q4_0 / Q5_0 / Q8_0 dots.
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

// 8 groups of 32: x = d * sc[g] * q - dmin * m[g], q 4 bits, sc/m 6 bits packed in 12 bytes.
// Group 2k is the low nibbles of qs[32k .. 32k+31], group 2k+1 their high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
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

// Activation form of the K-quant and IQ4_XS dots: x ≈ d * q, bsums[g] = sum of qs[16g .. 16g+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// The IQ4_NL / IQ4_XS non-linear codebook.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_XS) == 136);
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

// IQ4_XS's signed 6-bit scale of group g (0..7), already minus 32.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int g) {
  const int lo = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
  const int hi = (b.scales_h >> (2 * g)) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace strata::quant
