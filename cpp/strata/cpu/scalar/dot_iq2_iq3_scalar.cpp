// Portable reference dots of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S with Q8_K activations, as
// ggml's generic ggml_vec_dot_iq2_xxs_q8_K / _iq2_xs_q8_K / _iq2_s_q8_K / _iq3_xxs_q8_K /
// _iq3_s_q8_K: codebook magnitudes with their signs times the activation bytes, summed exactly per
// scale group, the group scales kept as odd integers (2·nibble + 1) and the constant factor (1/8
// for the IQ2 formats, 1/4 for IQ3_XXS, none for IQ3_S) applied once at the end.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/scalar/dot_scalar_rows.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using namespace strata::quant;

// Σ_j sign_j · grid_j · q8_j over one run of 8 elements.
template <typename Grid>
int signed_run(Grid grid, uint8_t signs, const int8_t* q8) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += ((signs >> j) & 1 ? -grid(j) : grid(j)) * q8[j];
  return s;
}

float dot_iq2_xxs(int64_t nb, const BlockIQ2_XXS* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {  // groups of 32 elements, one scale each
      uint32_t aux[2];
      std::memcpy(aux, x[i].qs + 4 * g, 8);
      int part = 0;
      for (int l = 0; l < 4; ++l) {
        const int q = static_cast<int>((aux[0] >> (8 * l)) & 0xFF);
        part += signed_run([q](int j) { return iq2xxs_grid_value(q, j); }, kIQSigns[(aux[1] >> (7 * l)) & 127],
                           y[i].qs + 32 * g + 8 * l);
      }
      isum += static_cast<int>(2 * (aux[1] >> 28) + 1) * part;
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

// IQ2_XS and IQ2_S: runs 2h and 2h + 1 (8 elements each) make half h, which has one scale;
// run(b, k, q8) is run k's signed sum with its 8 activation bytes.
template <typename Block, typename Run>
float dot_iq2_halves(int64_t nb, const Block* x, const BlockQ8_K* y, Run run) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 16; ++h) {
      const int8_t* q8 = y[i].qs + 16 * h;
      isum += iq_odd_scale(x[i], h) * (run(x[i], 2 * h, q8) + run(x[i], 2 * h + 1, q8 + 8));
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float dot_iq2_xs(int64_t nb, const BlockIQ2_XS* x, const BlockQ8_K* y) {
  return dot_iq2_halves(nb, x, y, [](const BlockIQ2_XS& b, int k, const int8_t* q8) {
    const uint16_t q = b.qs[k];
    return signed_run([q](int j) { return iq2xs_grid_value(q & 511, j); }, kIQSigns[q >> 9], q8);
  });
}

float dot_iq2_s(int64_t nb, const BlockIQ2_S* x, const BlockQ8_K* y) {
  return dot_iq2_halves(nb, x, y, [](const BlockIQ2_S& b, int k, const int8_t* q8) {
    const int q = iq2_s_index(b, k);
    return signed_run([q](int j) { return iq2s_grid_value(q, j); }, b.signs[k], q8);
  });
}

float dot_iq3_xxs(int64_t nb, const BlockIQ3_XXS* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      uint32_t aux;
      std::memcpy(&aux, x[i].qs + kQK_K / 4 + 4 * g, 4);
      const uint8_t* q3 = x[i].qs + 8 * g;
      int part = 0;
      for (int l = 0; l < 4; ++l) {
        const int g0 = q3[2 * l], g1 = q3[2 * l + 1];
        part += signed_run([g0, g1](int j) { return iq3xxs_grid_value(j < 4 ? g0 : g1, j % 4); },
                           kIQSigns[(aux >> (7 * l)) & 127], y[i].qs + 32 * g + 8 * l);
      }
      isum += static_cast<int>(2 * (aux >> 28) + 1) * part;
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return 0.25f * sum;
}

float dot_iq3_s(int64_t nb, const BlockIQ3_S* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      int part = 0;
      for (int l = 0; l < 4; ++l) {
        const int g0 = iq3_s_index(x[i], 8 * g + 2 * l), g1 = iq3_s_index(x[i], 8 * g + 2 * l + 1);
        part += signed_run([g0, g1](int j) { return iq3s_grid_value(j < 4 ? g0 : g1, j % 4); }, x[i].signs[4 * g + l],
                           y[i].qs + 32 * g + 8 * l);
      }
      isum += iq_odd_scale(x[i], g) * part;
    }
    sum += (fp16_to_fp32(x[i].d) * y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

void dot_rows_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XXS, dot_iq2_xxs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_XS, dot_iq2_xs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ2_S, dot_iq2_s>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_XXS, dot_iq3_xxs>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ3_S, dot_iq3_s>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::scalar
