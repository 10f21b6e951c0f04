// The AMX kernel table: the repacked Q8_0 / Q4_0 types with tile kernels for several activations
// (from kMinTileActs on; fewer, and the one-activation GEMV, run the AVX-512 kernels). Handed out by
// cpu::dot_kernel(type, Isa::Avx512) while cpu::amx_enabled().
#include "strata/cpu/amx/dot_amx.h"
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/kernels.h"

namespace strata::cpu::amx {
namespace {

using quant::GGMLType;

void multi_q8_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                    float* const* outs) {
  if (nact < kMinTileActs) return avx512::dot_rows_multi_q8_0_r16(n, w, stride, nrows, acts, nact, outs);
  dot_rows_multi_q8_0_r16_tiles(n, w, stride, nrows, acts, nact, outs);
}
void multi_q4_0_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                    float* const* outs) {
  if (nact < kMinTileActs) return avx512::dot_rows_multi_q4_0_r16(n, w, stride, nrows, acts, nact, outs);
  dot_rows_multi_q4_0_r16_tiles(n, w, stride, nrows, acts, nact, outs);
}

constexpr DotKernel kQ4_0_R16{GGMLType::Q8_0, avx512::quantize_act_q8_0, avx512::dot_rows_q4_0_r16, multi_q4_0_r16, 16};
constexpr DotKernel kQ8_0_R16{GGMLType::Q8_0, avx512::quantize_act_q8_0, avx512::dot_rows_q8_0_r16, multi_q8_0_r16, 16};

}  // namespace

const DotKernel* kernel(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0_R16: return &kQ4_0_R16;
    case GGMLType::Q8_0_R16: return &kQ8_0_R16;
    default: return nullptr;
  }
}

}  // namespace strata::cpu::amx
