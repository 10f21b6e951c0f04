// NEON activation quantizers, bitwise identical to the scalar rules in quant/quantize.cpp:
// Q8_0 rounds half away from zero (FRINTA is exactly roundf), Q8_K half to even (FRINTN).
#include <cstring>

#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/util/fp16.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

// Four 4 x int32 vectors of integral values within ±127 -> 16 int8 in order.
inline int8x16_t narrow(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
  const int16x8_t cd = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
  return vcombine_s8(vqmovn_s16(ab), vqmovn_s16(cd));
}

}  // namespace

void quantize_act_q8_0(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_0*>(act);
  for (int64_t i = 0; i < n / quant::kQK32; ++i, x += quant::kQK32) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int32x4_t q[8];
    for (int k = 0; k < 8; ++k) q[k] = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(v[k], id)));
    vst1q_s8(y[i].qs, narrow(q[0], q[1], q[2], q[3]));
    vst1q_s8(y[i].qs + 16, narrow(q[4], q[5], q[6], q[7]));
  }
}

void quantize_act_q8_k(const float* x, void* act, int64_t n) {
  auto* y = static_cast<quant::BlockQ8_K*>(act);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, x += quant::kQK_K) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int j = 0; j < quant::kQK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    const float amax = vmaxvq_f32(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(quant::BlockQ8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    for (int j = 0; j < quant::kQK_K; j += 16) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k) q[k] = vcvtq_s32_f32(vrndnq_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)));
      y[i].bsums[j / 16] = static_cast<int16_t>(vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]))));
      vst1q_s8(y[i].qs + j, narrow(q[0], q[1], q[2], q[3]));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::cpu::STRATA_NEON_NS
