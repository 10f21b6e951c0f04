// NEON dots of the plain float formats (F32, F16 widened by FCVTL, BF16 by shifting) with f32
// activations: four independent 4-lane FMA accumulators per row.
#include <cstring>

#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/util/fp16.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

struct F32Load {
  using T = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Load {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float load1(const uint16_t* p) { return fp16_to_fp32(*p); }
};
struct BF16Load {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float load1(const uint16_t* p) { return bf16_to_fp32(*p); }
};

template <typename L>
float dot_row(int64_t n, const typename L::T* w, const float* x) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = vfmaq_f32(a0, L::load4(w + i), vld1q_f32(x + i));
    a1 = vfmaq_f32(a1, L::load4(w + i + 4), vld1q_f32(x + i + 4));
    a2 = vfmaq_f32(a2, L::load4(w + i + 8), vld1q_f32(x + i + 8));
    a3 = vfmaq_f32(a3, L::load4(w + i + 12), vld1q_f32(x + i + 12));
  }
  for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, L::load4(w + i), vld1q_f32(x + i));
  float tail = 0.0f;
  for (; i < n; ++i) tail += L::load1(w + i) * x[i];
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3))) + tail;
}

template <typename L>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* x = static_cast<const float*>(act);
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot_row<L>(n, reinterpret_cast<const typename L::T*>(p + static_cast<std::size_t>(r) * stride), x);
}

}  // namespace

void dot_rows_f32(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<F32Load>(n, w, stride, nrows, act, out);
}
void dot_rows_f16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<F16Load>(n, w, stride, nrows, act, out);
}
void dot_rows_bf16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BF16Load>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::STRATA_NEON_NS
