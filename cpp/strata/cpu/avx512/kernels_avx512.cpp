// The AVX-512 (F/BW/VL/DQ + VNNI) kernel table.
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/kernels.h"

namespace strata::cpu::avx512 {
namespace {

using quant::GGMLType;

constexpr DotKernel kF32{GGMLType::F32, nullptr, dot_rows_f32, dot_rows_multi_f32};
constexpr DotKernel kF16{GGMLType::F32, nullptr, dot_rows_f16, dot_rows_multi_f16};
constexpr DotKernel kBF16{GGMLType::F32, nullptr, dot_rows_bf16, dot_rows_multi_bf16};
constexpr DotKernel kQ4_0{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q4_0, dot_rows_multi_q4_0};
constexpr DotKernel kQ5_0{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q5_0, dot_rows_multi_q5_0};
constexpr DotKernel kQ5_1{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q5_1, dot_rows_multi_q5_1};
constexpr DotKernel kIQ4_NL{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_iq4_nl, dot_rows_multi_iq4_nl};
constexpr DotKernel kQ8_0{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q8_0, dot_rows_multi_q8_0};
constexpr DotKernel kQ2_K{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q2_k, nullptr};
constexpr DotKernel kQ4_K{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q4_k, dot_rows_multi_q4_k};
constexpr DotKernel kQ5_K{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q5_k, dot_rows_multi_q5_k};
constexpr DotKernel kQ6_K{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q6_k, dot_rows_multi_q6_k};
constexpr DotKernel kIQ4_XS{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq4_xs, nullptr};
constexpr DotKernel kQ4_0_R16{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q4_0_r16, dot_rows_multi_q4_0_r16, 16};
constexpr DotKernel kQ5_0_R16{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q5_0_r16, dot_rows_multi_q5_0_r16, 16};
constexpr DotKernel kQ5_1_R16{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q5_1_r16, dot_rows_multi_q5_1_r16, 16};
constexpr DotKernel kIQ4_NL_R16{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_iq4_nl_r16, dot_rows_multi_iq4_nl_r16, 16};
constexpr DotKernel kQ8_0_R16{GGMLType::Q8_0, quantize_act_q8_0, dot_rows_q8_0_r16, dot_rows_multi_q8_0_r16, 16};
constexpr DotKernel kQ4_K_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q4_k_r16, dot_rows_multi_q4_k_r16, 16};
constexpr DotKernel kQ2_K_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q2_k_r16, dot_rows_multi_q2_k_r16, 16};
constexpr DotKernel kQ3_K_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q3_k_r16, dot_rows_multi_q3_k_r16, 16};
constexpr DotKernel kQ5_K_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q5_k_r16, dot_rows_multi_q5_k_r16, 16};
constexpr DotKernel kQ6_K_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_q6_k_r16, dot_rows_multi_q6_k_r16, 16};
constexpr DotKernel kIQ4_XS_R16{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq4_xs_r16, dot_rows_multi_iq4_xs_r16, 16};

constexpr DotKernel kIQ2_XXS{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_xxs, dot_rows_multi_iq2_xxs, 1,
                             kMaxActGroup};
constexpr DotKernel kIQ2_XS{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_xs, dot_rows_multi_iq2_xs, 1, kMaxActGroup};
constexpr DotKernel kIQ2_S{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_s, dot_rows_multi_iq2_s, 1, kMaxActGroup};
constexpr DotKernel kIQ3_XXS{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq3_xxs, dot_rows_multi_iq3_xxs, 1,
                             kMaxActGroup};
constexpr DotKernel kIQ3_S{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq3_s, dot_rows_multi_iq3_s, 1, kMaxActGroup};
constexpr DotKernel kIQ1_S{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq1_s, dot_rows_multi_iq1_s, 1, kMaxActGroup};
constexpr DotKernel kIQ1_M{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq1_m, dot_rows_multi_iq1_m, 1, kMaxActGroup};

// The IQ2 / IQ3 kernels whose grids AVX512_VBMI looks up (dot_iq_vbmi.cpp), for dot_kernel where
// cpu_has_avx512_vbmi().
constexpr DotKernel kIQ2_XXS_VBMI{
    GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_xxs_vbmi, dot_rows_multi_iq2_xxs_vbmi, 1, kMaxActGroup};
constexpr DotKernel kIQ2_XS_VBMI{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_xs_vbmi, dot_rows_multi_iq2_xs_vbmi, 1,
                                 kMaxActGroup};
constexpr DotKernel kIQ2_S_VBMI{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq2_s_vbmi, dot_rows_multi_iq2_s_vbmi, 1,
                                kMaxActGroup};
constexpr DotKernel kIQ3_XXS_VBMI{
    GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq3_xxs_vbmi, dot_rows_multi_iq3_xxs_vbmi, 1, kMaxActGroup};
constexpr DotKernel kIQ3_S_VBMI{GGMLType::Q8_K, quantize_act_q8_k, dot_rows_iq3_s_vbmi, dot_rows_multi_iq3_s_vbmi, 1,
                                kMaxActGroup};

}  // namespace

const DotKernel* kernel(GGMLType type) {
  switch (type) {
    case GGMLType::F32: return &kF32;
    case GGMLType::F16: return &kF16;
    case GGMLType::BF16: return &kBF16;
    case GGMLType::Q4_0: return &kQ4_0;
    case GGMLType::Q5_0: return &kQ5_0;
    case GGMLType::Q5_1: return &kQ5_1;
    case GGMLType::IQ4_NL: return &kIQ4_NL;
    case GGMLType::Q8_0: return &kQ8_0;
    case GGMLType::Q2_K: return &kQ2_K;
    case GGMLType::Q4_K: return &kQ4_K;
    case GGMLType::Q5_K: return &kQ5_K;
    case GGMLType::Q6_K: return &kQ6_K;
    case GGMLType::IQ4_XS: return &kIQ4_XS;
    case GGMLType::Q4_0_R16: return &kQ4_0_R16;
    case GGMLType::Q5_0_R16: return &kQ5_0_R16;
    case GGMLType::IQ4_NL_R16: return &kIQ4_NL_R16;
    case GGMLType::Q5_1_R16: return &kQ5_1_R16;
    case GGMLType::Q8_0_R16: return &kQ8_0_R16;
    case GGMLType::Q2_K_R16: return &kQ2_K_R16;
    case GGMLType::Q3_K_R16: return &kQ3_K_R16;
    case GGMLType::Q4_K_R16: return &kQ4_K_R16;
    case GGMLType::Q5_K_R16: return &kQ5_K_R16;
    case GGMLType::Q6_K_R16: return &kQ6_K_R16;
    case GGMLType::IQ4_XS_R16: return &kIQ4_XS_R16;
    case GGMLType::IQ2_XXS: return &kIQ2_XXS;
    case GGMLType::IQ2_XS: return &kIQ2_XS;
    case GGMLType::IQ2_S: return &kIQ2_S;
    case GGMLType::IQ3_XXS: return &kIQ3_XXS;
    case GGMLType::IQ3_S: return &kIQ3_S;
    case GGMLType::IQ1_S: return &kIQ1_S;
    case GGMLType::IQ1_M: return &kIQ1_M;
    default: return nullptr;
  }
}

const DotKernel* vbmi_kernel(GGMLType type) {
  switch (type) {
    case GGMLType::IQ2_XXS: return &kIQ2_XXS_VBMI;
    case GGMLType::IQ2_XS: return &kIQ2_XS_VBMI;
    case GGMLType::IQ2_S: return &kIQ2_S_VBMI;
    case GGMLType::IQ3_XXS: return &kIQ3_XXS_VBMI;
    case GGMLType::IQ3_S: return &kIQ3_S_VBMI;
    default: return nullptr;
  }
}

}  // namespace strata::cpu::avx512
