// Portable reference dots of Q3_K and Q5_K with Q8_K activations: plain loops, exact integer
// block sums as ggml_vec_dot_q3_K_q8_K / _q5_K_q8_K compute them, f32 accumulation per block.
// Every SIMD path is tested against these.
#include "strata/cpu/dot_rows.h"
#include "strata/cpu/scalar/dot_scalar_rows.h"
#include "strata/quant/blocks.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using namespace strata::quant;

float dot_q3_k(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[i].qs + 32 * h;
      const int8_t* q8 = y[i].qs + 128 * h;
      for (int s = 0; s < 4; ++s) {
        const int m = 1 << (4 * h + s);
        for (int half = 0; half < 2; ++half) {
          int part = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            part += (((q[l] >> (2 * s)) & 3) - ((x[i].hmask[l] & m) ? 0 : 4)) * q8[32 * s + l];
          isum += q3_k_scale(x[i].scales, 8 * h + 2 * s + half) * part;
        }
      }
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q5_k(int64_t nb, const BlockQ5_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0, summs = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      q4_k_scale_min(g, x[i].scales, sc, m);
      const uint8_t* q = x[i].qs + 32 * (g / 2);
      const int8_t* q8 = y[i].qs + 32 * g;
      const int shift = 4 * (g % 2);
      int part = 0;
      for (int l = 0; l < 32; ++l) part += (((q[l] >> shift) & 0xF) | (((x[i].qh[l] >> g) & 1) << 4)) * q8[l];
      isum += sc * part;
      summs += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

}  // namespace

void dot_rows_q3_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ3_K, dot_q3_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ5_K, dot_q5_k>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::scalar
