#pragma once
// The AVX-512 (F/BW/VL/DQ + VNNI) kernels of this folder, gathered into a table by
// kernels_avx512.cpp.
#include <cstddef>
#include <cstdint>

namespace strata::cpu::avx512 {

#define STRATA_AVX512_DOT(name) \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out)
STRATA_AVX512_DOT(dot_rows_f32);
STRATA_AVX512_DOT(dot_rows_f16);
STRATA_AVX512_DOT(dot_rows_bf16);
STRATA_AVX512_DOT(dot_rows_q4_0);
STRATA_AVX512_DOT(dot_rows_q5_0);
STRATA_AVX512_DOT(dot_rows_q5_1);
STRATA_AVX512_DOT(dot_rows_iq4_nl);
STRATA_AVX512_DOT(dot_rows_q8_0);
STRATA_AVX512_DOT(dot_rows_q2_k);
STRATA_AVX512_DOT(dot_rows_q4_k);
STRATA_AVX512_DOT(dot_rows_q5_k);
STRATA_AVX512_DOT(dot_rows_q6_k);
STRATA_AVX512_DOT(dot_rows_iq4_xs);
STRATA_AVX512_DOT(dot_rows_q8_0_r16);
STRATA_AVX512_DOT(dot_rows_q4_0_r16);  // repacked Q4_0 (cpu/repack/layout.h)
STRATA_AVX512_DOT(dot_rows_q5_0_r16);
STRATA_AVX512_DOT(dot_rows_iq4_nl_r16);
STRATA_AVX512_DOT(dot_rows_q5_1_r16);
STRATA_AVX512_DOT(dot_rows_q4_k_r16);  // dot_repacked_k_avx512.cpp
STRATA_AVX512_DOT(dot_rows_q2_k_r16);
STRATA_AVX512_DOT(dot_rows_q3_k_r16);
STRATA_AVX512_DOT(dot_rows_q5_k_r16);
STRATA_AVX512_DOT(dot_rows_q6_k_r16);
STRATA_AVX512_DOT(dot_rows_iq4_xs_r16);  // dot_repacked_iq4_xs_avx512.cpp
STRATA_AVX512_DOT(dot_rows_iq2_xxs);     // dot_iq_avx512.cpp (the AVX2 kernels built here)
STRATA_AVX512_DOT(dot_rows_iq2_xs);
STRATA_AVX512_DOT(dot_rows_iq2_s);
STRATA_AVX512_DOT(dot_rows_iq3_xxs);
STRATA_AVX512_DOT(dot_rows_iq3_s);
STRATA_AVX512_DOT(dot_rows_iq1_s);
STRATA_AVX512_DOT(dot_rows_iq1_m);
STRATA_AVX512_DOT(dot_rows_iq3_s_vbmi);  // dot_iq_vbmi.cpp: only where cpu_has_avx512_vbmi()
STRATA_AVX512_DOT(dot_rows_iq3_xxs_vbmi);
STRATA_AVX512_DOT(dot_rows_iq2_xxs_vbmi);
STRATA_AVX512_DOT(dot_rows_iq2_xs_vbmi);
STRATA_AVX512_DOT(dot_rows_iq2_s_vbmi);
#undef STRATA_AVX512_DOT
// One IQ3_S / IQ3_XXS / IQ2_XXS / IQ2_XS / IQ2_S block's 256 weights + 128 (signs applied) in order and
// the odd scale of each 16 weights, through the VBMI lookups (dot_iq_vbmi.cpp; only where
// cpu_has_avx512_vbmi()).
void iq3_s_vbmi_biased(const void* block, uint8_t* w, int32_t* scales);
void iq3_xxs_vbmi_biased(const void* block, uint8_t* w, int32_t* scales);
void iq2_xxs_vbmi_biased(const void* block, uint8_t* w, int32_t* scales);
void iq2_xs_vbmi_biased(const void* block, uint8_t* w, int32_t* scales);
void iq2_s_vbmi_biased(const void* block, uint8_t* w, int32_t* scales);
#define STRATA_AVX512_DOT_MULTI(name)                                                                       \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact, \
            float* const* outs)
STRATA_AVX512_DOT_MULTI(dot_rows_multi_f32);  // dot_float_avx512.cpp
STRATA_AVX512_DOT_MULTI(dot_rows_multi_f16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_bf16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q4_0);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_0);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_1);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq4_nl);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q8_0);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q8_0_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q4_0_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_0_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq4_nl_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_1_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q4_k_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q2_k_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q3_k_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_k_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q6_k_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq4_xs_r16);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q4_k);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q5_k);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_q6_k);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_xxs);  // dot_iq_avx512.cpp
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_xs);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_s);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq3_xxs);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq3_s);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq1_s);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq1_m);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_xxs_vbmi);  // dot_iq_avx512.cpp over the VBMI lookups
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_xs_vbmi);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq2_s_vbmi);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq3_xxs_vbmi);
STRATA_AVX512_DOT_MULTI(dot_rows_multi_iq3_s_vbmi);
#undef STRATA_AVX512_DOT_MULTI

void quantize_act_q8_0(const float* x, void* act, int64_t n);
void quantize_act_q8_k(const float* x, void* act, int64_t n);

}  // namespace strata::cpu::avx512
