#pragma once
// The NEON kernels of this folder, gathered into a table by kernels_neon.cpp.
//
// The folder is compiled twice (CMakeLists.txt): for plain ARMv8-A into namespace neon (the Isa
// Neon path), and with -march=armv8.2-a+dotprod and STRATA_NEON_NS=neon_dotprod (the NeonDotprod
// path: simd_neon.h's int8 dot becomes SDOT). Everything but these entry points and the table has
// internal linkage, so the two builds of one file never clash.
#include <cstddef>
#include <cstdint>

#ifndef STRATA_NEON_NS
#define STRATA_NEON_NS neon
#endif

namespace strata::cpu::STRATA_NEON_NS {

#define STRATA_NEON_DOT(name) \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out)
STRATA_NEON_DOT(dot_rows_f32);
STRATA_NEON_DOT(dot_rows_f16);
STRATA_NEON_DOT(dot_rows_bf16);
STRATA_NEON_DOT(dot_rows_q4_0);
STRATA_NEON_DOT(dot_rows_q5_0);
STRATA_NEON_DOT(dot_rows_q5_1);
STRATA_NEON_DOT(dot_rows_iq4_nl);
STRATA_NEON_DOT(dot_rows_q8_0);
STRATA_NEON_DOT(dot_rows_q2_k);
STRATA_NEON_DOT(dot_rows_q4_k);
STRATA_NEON_DOT(dot_rows_q6_k);
STRATA_NEON_DOT(dot_rows_iq4_xs);
STRATA_NEON_DOT(dot_rows_q3_k);     // dot_q3_k_q5_k_neon.cpp
STRATA_NEON_DOT(dot_rows_q5_k);     // dot_q3_k_q5_k_neon.cpp
STRATA_NEON_DOT(dot_rows_iq2_xxs);  // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT(dot_rows_iq2_xs);   // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT(dot_rows_iq2_s);    // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT(dot_rows_iq3_xxs);  // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT(dot_rows_iq3_s);    // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT(dot_rows_iq1_s);    // dot_iq1_neon.cpp
STRATA_NEON_DOT(dot_rows_iq1_m);    // dot_iq1_neon.cpp
#undef STRATA_NEON_DOT

// Several activations (kernels.h's DotRowsMultiFn): each weight super-block decoded once for all.
#define STRATA_NEON_DOT_MULTI(name)                                                                         \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact, \
            float* const* outs)
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq2_xxs);  // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq2_xs);   // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq2_s);    // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq3_xxs);  // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq3_s);    // dot_iq2_iq3_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq1_s);    // dot_iq1_neon.cpp
STRATA_NEON_DOT_MULTI(dot_rows_multi_iq1_m);    // dot_iq1_neon.cpp
#undef STRATA_NEON_DOT_MULTI

void quantize_act_q8_0(const float* x, void* act, int64_t n);
void quantize_act_q8_k(const float* x, void* act, int64_t n);

}  // namespace strata::cpu::STRATA_NEON_NS
