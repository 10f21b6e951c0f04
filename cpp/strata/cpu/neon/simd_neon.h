#pragma once
// NEON helpers shared by the files of this folder (compiled only on AArch64, where NEON is
// baseline). The int8 dot uses the SDOT instruction where the translation unit targets it (the
// neon_dotprod build of this folder, or a whole build for ARMv8.2+dotprod) and widening
// multiplies otherwise; both are exact in int32.
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "strata/cpu/neon/dot_neon.h"  // STRATA_NEON_NS

namespace strata::cpu::STRATA_NEON_NS {
namespace {

inline int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t p1 = vmull_high_s8(a, b);
  return vaddq_s32(acc, vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
#endif
}

// One fp16 bit pattern -> f32 by the FCVT instruction (baseline AArch64; exact, the same value as
// the portable fp16_to_fp32, in one instruction instead of about fifteen).
inline float half(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, 2);
  return v;
}

// Sum of a·b over 16 int8 lanes.
inline int dot16(int8x16_t a, int8x16_t b) { return vaddvq_s32(dot_s8(vdupq_n_s32(0), a, b)); }

}  // namespace
}  // namespace strata::cpu::STRATA_NEON_NS
