#pragma once
// The 32 weights of a Q4_0 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL block as two 16-lane int8 vectors (elements
// 0..15, 16..31; Q5_1's unsigned, without its min): shared by the SDOT dots (cpu/neon/) and the
// SMMLA dots (cpu/neon_i8mm/). Plain ARMv8-A.
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "strata/quant/blocks.h"

namespace strata::cpu::q32 {
namespace {

struct Q4_0Bytes {
  static void get(const quant::BlockQ4_0& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), eight);
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  }
};
// The 5-bit values 0..31 of a Q5_0 / Q5_1 block: low 4 bits from qs's nibbles, bit 4 of element j
// from bit j of qh.
template <typename Block>
inline void q5_unsigned(const Block& b, uint8x16_t& lo, uint8x16_t& hi) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bits = vld1q_u8(kBits);
  const uint8x16_t h0 = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(qh)), vdup_n_u8(static_cast<uint8_t>(qh >> 8)));
  const uint8x16_t h1 =
      vcombine_u8(vdup_n_u8(static_cast<uint8_t>(qh >> 16)), vdup_n_u8(static_cast<uint8_t>(qh >> 24)));
  const uint8x16_t b16 = vdupq_n_u8(0x10);
  const uint8x16_t q = vld1q_u8(b.qs);
  lo = vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vandq_u8(vtstq_u8(h0, bits), b16));
  hi = vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(vtstq_u8(h1, bits), b16));
}

struct Q5_0Bytes {
  static void get(const quant::BlockQ5_0& b, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t ul, uh;
    q5_unsigned(b, ul, uh);
    const int8x16_t sixteen = vdupq_n_s8(16);
    lo = vsubq_s8(vreinterpretq_s8_u8(ul), sixteen);
    hi = vsubq_s8(vreinterpretq_s8_u8(uh), sixteen);
  }
};
// Q5_1's q unsigned (0..31, so exact as int8): its min m enters the dot separately, as m·Σy.
struct Q5_1Bytes {
  static void get(const quant::BlockQ5_1& b, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t ul, uh;
    q5_unsigned(b, ul, uh);
    lo = vreinterpretq_s8_u8(ul);
    hi = vreinterpretq_s8_u8(uh);
  }
};
// IQ4_NL's nibbles looked up in the 16 codebook values (one TBL per 16 lanes).
struct IQ4_NLBytes {
  static void get(const quant::BlockIQ4_NL& b, int8x16_t& lo, int8x16_t& hi) {
    const int8x16_t values = vld1q_s8(quant::kIQ4NLValues);
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vqtbl1q_s8(values, vandq_u8(q, vdupq_n_u8(0x0F)));
    hi = vqtbl1q_s8(values, vshrq_n_u8(q, 4));
  }
};
struct Q8_0Bytes {
  static void get(const quant::BlockQ8_0& b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  }
};

}  // namespace
}  // namespace strata::cpu::q32
