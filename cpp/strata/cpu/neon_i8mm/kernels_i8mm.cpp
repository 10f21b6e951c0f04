// The neon-i8mm kernel table: SMMLA kernels for Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K (one and several activations),
// every other type the neon-dotprod kernel (SDOT; i8mm cores all have dotprod).
#include "strata/cpu/kernels.h"
#include "strata/cpu/neon/dot_neon.h"  // the activation quantizer (the same bits on every path)
#include "strata/cpu/neon_i8mm/dot_i8mm.h"

namespace strata::cpu::neon_i8mm {
namespace {

using quant::GGMLType;

constexpr DotKernel kQ4_0{GGMLType::Q8_0, neon::quantize_act_q8_0, dot_rows_q4_0, dot_rows_multi_q4_0};
constexpr DotKernel kQ5_0{GGMLType::Q8_0, neon::quantize_act_q8_0, dot_rows_q5_0, dot_rows_multi_q5_0};
constexpr DotKernel kQ8_0{GGMLType::Q8_0, neon::quantize_act_q8_0, dot_rows_q8_0, dot_rows_multi_q8_0};
constexpr DotKernel kQ4_K{GGMLType::Q8_K, neon::quantize_act_q8_k, dot_rows_q4_k, dot_rows_multi_q4_k};
constexpr DotKernel kQ6_K{GGMLType::Q8_K, neon::quantize_act_q8_k, dot_rows_q6_k, dot_rows_multi_q6_k};

}  // namespace

const DotKernel* kernel(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_0: return &kQ4_0;
    case GGMLType::Q5_0: return &kQ5_0;
    case GGMLType::Q8_0: return &kQ8_0;
    case GGMLType::Q4_K: return &kQ4_K;
    case GGMLType::Q6_K: return &kQ6_K;
    default: return neon_dotprod::kernel(type);
  }
}

}  // namespace strata::cpu::neon_i8mm
