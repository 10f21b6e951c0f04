// NEON dots of IQ1_S and IQ1_M with Q8_K activations: two grid entries (8 values −1, 0, +1 each)
// per 16-lane register, the lanes made 8·g ± 1 (|.| ≤ 9) by the delta sign (IQ1_S: one per group of
// 32; IQ1_M: one per run of 8), so the 16-lane dots form 8·Σ g·q8 ± Σq8 at once, times the odd scale
// (per group, or per half for IQ1_M) in int32. The delta's 1/8 is applied once at the end: the same
// integer sums as the scalar reference. Each format is a group decoder run by dot_iq_neon.h's one-
// and several-activation loops.
#include "strata/cpu/neon/dot_iq_neon.h"
#include "strata/cpu/neon/dot_neon.h"
#include "strata/cpu/neon/simd_neon.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::STRATA_NEON_NS {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::kIQ1SGrid;

// Grid entries a (lanes 0..7) and b (lanes 8..15).
inline int8x16_t grid_pair(int a, int b) {
  return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(kIQ1SGrid[a]), vcreate_u64(kIQ1SGrid[b])));
}

// The formats' group decoders (dot_iq_neon.h): group g holds elements 32g .. 32g + 31.
struct Iq1S {  // one scale and one delta sign per group
  using Block = BlockIQ1_S;
  static constexpr bool kHalfScales = false;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return half(b.d); }
  static IqGroup group(const Block& b, int g) {
    const int k = 4 * g;  // the group's first run
    const int8x16_t delta = vdupq_n_s8(static_cast<int8_t>(quant::iq1_s_delta_negative(b, g) ? -1 : 1));
    const int8x16_t g0 = grid_pair(quant::iq1_s_index(b, k), quant::iq1_s_index(b, k + 1));
    const int8x16_t g1 = grid_pair(quant::iq1_s_index(b, k + 2), quant::iq1_s_index(b, k + 3));
    return {vaddq_s8(vshlq_n_s8(g0, 3), delta), vaddq_s8(vshlq_n_s8(g1, 3), delta), quant::iq1_s_odd_scale(b, g), 0};
  }
};

struct Iq1M {  // halves 2g and 2g + 1 (runs 4g .. 4g + 3), one scale each, a delta sign per run
  using Block = BlockIQ1_M;
  static constexpr bool kHalfScales = true;
  static constexpr float kScale = 0.125f;
  static float d(const Block& b) { return half(quant::iq1_m_d(b)); }
  static int8x16_t half_weights(const Block& b, int h) {
    const int k = 2 * h;
    // ±1 per run: −1 where its delta sign is set.
    const int8x8_t d0 = vdup_n_s8(static_cast<int8_t>(1 - 2 * quant::iq1_m_delta_negative(b, k)));
    const int8x8_t d1 = vdup_n_s8(static_cast<int8_t>(1 - 2 * quant::iq1_m_delta_negative(b, k + 1)));
    const int8x16_t grid = grid_pair(quant::iq1_m_index(b, k), quant::iq1_m_index(b, k + 1));
    return vaddq_s8(vshlq_n_s8(grid, 3), vcombine_s8(d0, d1));  // 8·g ± 1
  }
  static IqGroup group(const Block& b, int g) {
    return {half_weights(b, 2 * g), half_weights(b, 2 * g + 1), quant::iq1_m_odd_scale(b, 2 * g),
            quant::iq1_m_odd_scale(b, 2 * g + 1)};
  }
};

}  // namespace

void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<Iq1S>(n, w, stride, nrows, act, out);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<Iq1M>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<Iq1S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<Iq1M>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::STRATA_NEON_NS
