// Reference kernels of the repacked types (cpu/repack/layout.h): the plain scalar kernels'
// arithmetic, block by block, read from the interleaved layout, so a repacked row's dot is bitwise
// the plain Q4_0 / Q8_0 scalar dot. Every SIMD repacked kernel is tested against these.
#include <algorithm>
#include <cstring>

#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/layout.h"
#include "strata/quant/blocks.h"
#include "strata/quant/quantize.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using quant::BlockQ8_0;
using quant::GGMLType;

struct Q8 {
  using L = repack::Q8Layout;
  static int sum(const uint8_t* qs, int r, const BlockQ8_0& y) {
    int sumi = 0;
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 4; ++j) sumi += static_cast<int8_t>(qs[64 * k + 4 * r + j] ^ 0x80u) * y.qs[4 * k + j];
    return sumi;
  }
};

struct Q4 {
  using L = repack::Q4Layout;
  static int sum(const uint8_t* qs, int r, const BlockQ8_0& y) {
    int sumi = 0;
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 4; ++j) {
        const int q = qs[64 * c + 4 * r + j];
        sumi += ((q & 0xF) - 8) * y.qs[4 * c + j] + ((q >> 4) - 8) * y.qs[16 + 4 * c + j];
      }
    return sumi;
  }
};

template <typename F>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  using L = typename F::L;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  for (int64_t g = 0; g * repack::kRows < nrows; ++g) {
    const uint8_t* grp = p + static_cast<std::size_t>(g) * repack::kRows * stride;
    const int64_t n_in = std::min<int64_t>(repack::kRows, nrows - g * repack::kRows);
    for (int r = 0; r < n_in; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        uint16_t d;
        std::memcpy(&d, grp + L::d_off(b, nb) + 2 * static_cast<std::size_t>(r), 2);
        sum += static_cast<float>(F::sum(grp + L::qs_off(b, nb), r, y[b])) * (fp16_to_fp32(d) * fp16_to_fp32(y[b].d));
      }
      out[g * repack::kRows + r] = sum;
    }
  }
}

void act_q8_0(const float* x, void* a, int64_t n) { quant::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(a), n); }

constexpr DotKernel kQ4_0_R16{GGMLType::Q8_0, act_q8_0, rows<Q4>, nullptr, repack::kRows};
constexpr DotKernel kQ8_0_R16{GGMLType::Q8_0, act_q8_0, rows<Q8>, nullptr, repack::kRows};

}  // namespace

const DotKernel* repacked_kernel(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0_R16: return &kQ4_0_R16;
    case GGMLType::Q8_0_R16: return &kQ8_0_R16;
    default: return nullptr;
  }
}

}  // namespace strata::cpu::scalar
