// Reference kernels of the repacked types (cpu/repack/layout.h): the plain scalar kernels'
// arithmetic, block by block, read from the interleaved layout, so a repacked row's dot is bitwise
// the plain Q4_0 / Q8_0 scalar dot. Every SIMD repacked kernel is tested against these.
#include <algorithm>

#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/layout.h"
#include "strata/quant/blocks.h"
#include "strata/quant/quantize.h"
#include "strata/util/fp16.h"

namespace strata::cpu::scalar {
namespace {

using quant::BlockQ8_0;
using quant::GGMLType;

int block_q8_0(const repack::BlockQ8_0x16& b, int r, const BlockQ8_0& y) {
  int sumi = 0;
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 4; ++j)
      sumi += static_cast<int8_t>(b.qs[64 * k + 4 * r + j] ^ 0x80u) * y.qs[4 * k + j];
  return sumi;
}

int block_q4_0(const repack::BlockQ4_0x16& b, int r, const BlockQ8_0& y) {
  int sumi = 0;
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 4; ++j) {
      const int q = b.qs[64 * c + 4 * r + j];
      sumi += ((q & 0xF) - 8) * y.qs[4 * c + j] + ((q >> 4) - 8) * y.qs[16 + 4 * c + j];
    }
  return sumi;
}

template <typename Block, int (*Sum)(const Block&, int, const BlockQ8_0&)>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  for (int64_t g = 0; g * repack::kRows < nrows; ++g) {
    const auto* blocks = reinterpret_cast<const Block*>(p + static_cast<std::size_t>(g) * repack::kRows * stride);
    const int64_t n_in = std::min<int64_t>(repack::kRows, nrows - g * repack::kRows);
    for (int r = 0; r < n_in; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b)
        sum += static_cast<float>(Sum(blocks[b], r, y[b])) * (fp16_to_fp32(blocks[b].d[r]) * fp16_to_fp32(y[b].d));
      out[g * repack::kRows + r] = sum;
    }
  }
}

void act_q8_0(const float* x, void* a, int64_t n) { quant::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(a), n); }

constexpr DotKernel kQ4_0_R16{GGMLType::Q8_0, act_q8_0, rows<repack::BlockQ4_0x16, block_q4_0>, nullptr,
                              repack::kRows};
constexpr DotKernel kQ8_0_R16{GGMLType::Q8_0, act_q8_0, rows<repack::BlockQ8_0x16, block_q8_0>, nullptr,
                              repack::kRows};

}  // namespace

const DotKernel* repacked_kernel(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0_R16: return &kQ4_0_R16;
    case GGMLType::Q8_0_R16: return &kQ8_0_R16;
    default: return nullptr;
  }
}

}  // namespace strata::cpu::scalar
