#pragma once
// The weights of a Q6_K block as signed int8 lanes (q − 32): shared by the SDOT dot (cpu/neon/)
// and the SMMLA one (cpu/neon_i8mm/). Plain ARMv8-A.
#include <arm_neon.h>

#include <cstdint>

#include "strata/quant/blocks.h"

namespace strata::cpu::q6k {
namespace {

// Half h (elements 128h .. 128h+127) as its eight 16-element groups in order, g[k] = group 8h+k.
inline void half_groups(const quant::BlockQ6_K& x, int h, int8x16_t (&g)[8]) {
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  const uint8x16_t m3 = vdupq_n_u8(3);
  const int8x16_t m32 = vdupq_n_s8(32);
  auto s8 = [](uint8x16_t v) { return vreinterpretq_s8_u8(v); };
  const uint8_t* ql = x.ql + 64 * h;
  const uint8_t* qh = x.qh + 32 * h;
  const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
  const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
  g[0] = vsubq_s8(s8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h0, m3), 4))), m32);
  g[1] = vsubq_s8(s8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(h1, m3), 4))), m32);
  g[2] = vsubq_s8(s8(vorrq_u8(vandq_u8(l2, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 2), m3), 4))), m32);
  g[3] = vsubq_s8(s8(vorrq_u8(vandq_u8(l3, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 2), m3), 4))), m32);
  g[4] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 4), m3), 4))), m32);
  g[5] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 4), m3), 4))), m32);
  g[6] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l2, 4), vshlq_n_u8(vshrq_n_u8(h0, 6), 4))), m32);
  g[7] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(l3, 4), vshlq_n_u8(vshrq_n_u8(h1, 6), 4))), m32);
}

}  // namespace
}  // namespace strata::cpu::q6k
