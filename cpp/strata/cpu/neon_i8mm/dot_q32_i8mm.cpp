// SMMLA dots of the 32-value block formats (Q4_0, Q5_0, Q8_0) with Q8_0 activations (ARMv8.6
// i8mm; this folder is built with -march=armv8.2-a+dotprod+i8mm and runs only where the OS reports
// i8mm). SMMLA multiplies a 2×8 int8 matrix by the transpose of another into a 2×2 int32 tile:
// two weight rows × two activations over 8 bytes, twice SDOT's multiplies per instruction. Four
// SMMLA per block leave each (row, activation) pair's exact block dot in one lane, which then
// accumulates fma(float(dot), d_w·d_a, acc) over the blocks in order.
//
// A lane's arithmetic never depends on its tile partners (a lone row or activation is paired with
// itself and the duplicate lanes dropped), so one activation (dot_rows: weight rows in pairs
// against the activation twice) and several (dot_rows_multi: pairs of rows × pairs of
// activations, each weight block unpacked once for up to four activations) give bitwise the same
// numbers, as gemm == gemv requires (cpu/kernels.h).
#include <arm_neon.h>

#include "strata/cpu/neon/q32_bytes_neon.h"
#include "strata/cpu/neon_i8mm/dot_i8mm.h"
#include "strata/cpu/neon_i8mm/tile_rows.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::neon_i8mm {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

template <typename BlockT, typename Bytes>
struct Q32Tiles {
  using Block = BlockT;
  using Act = BlockQ8_0;
  static constexpr int64_t kBlockValues = quant::kQK32;

  // RP pairs of weight rows (x[2p], x[2p+1]) × AP pairs of activations (y[2q], y[2q+1]) over nb
  // blocks; acc[p][q] lanes = {x[2p]·y[2q], x[2p]·y[2q+1], x[2p+1]·y[2q], x[2p+1]·y[2q+1]}.
  template <int RP, int AP>
  static void tiles(int64_t nb, const Block* const* x, const BlockQ8_0* const* y, float32x4_t (&acc)[RP][AP]) {
    for (int p = 0; p < RP; ++p)
      for (int q = 0; q < AP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      int8x16_t a[AP][4];
      float32x4_t da[AP];
      for (int q = 0; q < AP; ++q) {
        const BlockQ8_0& y0 = y[2 * q][b];
        const BlockQ8_0& y1 = y[2 * q + 1][b];
        const int8x16_t y0l = vld1q_s8(y0.qs), y0h = vld1q_s8(y0.qs + 16);
        const int8x16_t y1l = vld1q_s8(y1.qs), y1h = vld1q_s8(y1.qs + 16);
        a[q][0] = zip_lo(y0l, y1l);
        a[q][1] = zip_hi(y0l, y1l);
        a[q][2] = zip_lo(y0h, y1h);
        a[q][3] = zip_hi(y0h, y1h);
        da[q] = halves(y0.d, y1.d, y0.d, y1.d);
      }
      for (int p = 0; p < RP; ++p) {
        const Block& x0 = x[2 * p][b];
        const Block& x1 = x[2 * p + 1][b];
        int8x16_t x0l, x0h, x1l, x1h;
        Bytes::get(x0, x0l, x0h);
        Bytes::get(x1, x1l, x1h);
        const int8x16_t w0 = zip_lo(x0l, x1l), w1 = zip_hi(x0l, x1l), w2 = zip_lo(x0h, x1h), w3 = zip_hi(x0h, x1h);
        const float32x4_t dw = halves(x0.d, x0.d, x1.d, x1.d);
        for (int q = 0; q < AP; ++q) {
          int32x4_t t = vmmlaq_s32(vdupq_n_s32(0), w0, a[q][0]);
          t = vmmlaq_s32(t, w1, a[q][1]);
          t = vmmlaq_s32(t, w2, a[q][2]);
          t = vmmlaq_s32(t, w3, a[q][3]);
          acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(t), vmulq_f32(dw, da[q]));
        }
      }
    }
  }
};

}  // namespace

void dot_rows_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q32Tiles<BlockQ4_0, q32::Q4_0Bytes>>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q32Tiles<BlockQ5_0, q32::Q5_0Bytes>>(n, w, stride, nrows, act, out);
}
void dot_rows_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q32Tiles<BlockQ8_0, q32::Q8_0Bytes>>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q32Tiles<BlockQ4_0, q32::Q4_0Bytes>>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q32Tiles<BlockQ5_0, q32::Q5_0Bytes>>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi<Q32Tiles<BlockQ8_0, q32::Q8_0Bytes>>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::neon_i8mm
