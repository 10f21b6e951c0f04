// Portable reference dots of IQ1_S and IQ1_M with Q8_K activations, as ggml's generic
// ggml_vec_dot_iq1_s_q8_K / _iq1_m_q8_K: grid values (−1, 0, +1) times the activation bytes, summed
// exactly per scale group, plus the delta term ±Σq8 (IQ1_S per group of 32 from the activation's
// bsums, IQ1_M per run of 8). Scales are kept as odd integers (2s + 1) and the delta's 1/8 is folded
// into the integer sum as 8·Σ g·q8 ± Σq8, so one factor 1/8 is applied once per row.
#include "strata/cpu/dot_rows.h"
#include "strata/cpu/scalar/dot_scalar_rows.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using namespace strata::quant;

// Σ_j grid_j · q8_j over one run of 8 elements of grid entry q.
int grid_run(int q, const int8_t* q8) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += iq1s_grid_value(q, j) * q8[j];
  return s;
}

float dot_iq1_s(int64_t nb, const BlockIQ1_S* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {  // groups of 32 elements: one scale, one delta sign
      int part = 0;
      for (int l = 0; l < 4; ++l) part += grid_run(iq1_s_index(x[i], 4 * g + l), y[i].qs + 32 * g + 8 * l);
      const int q8sum = y[i].bsums[2 * g] + y[i].bsums[2 * g + 1];
      isum += iq1_s_odd_scale(x[i], g) * (8 * part + (iq1_s_delta_negative(x[i], g) ? -q8sum : q8sum));
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq1_m(int64_t nb, const BlockIQ1_M* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 16; ++h) {  // halves of 16 elements (runs 2h, 2h + 1): one scale each
      int part = 0;
      for (int k = 2 * h; k < 2 * h + 2; ++k) {
        const int8_t* q8 = y[i].qs + 8 * k;
        int q8sum = 0;
        for (int j = 0; j < 8; ++j) q8sum += q8[j];
        part += 8 * grid_run(iq1_m_index(x[i], k), q8) + (iq1_m_delta_negative(x[i], k) ? -q8sum : q8sum);
      }
      isum += iq1_m_odd_scale(x[i], h) * part;
    }
    sum += (fp16_to_fp32(iq1_m_d(x[i])) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

}  // namespace

void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_S, dot_iq1_s>(n, w, stride, nrows, act, out);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ1_M, dot_iq1_m>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::scalar
