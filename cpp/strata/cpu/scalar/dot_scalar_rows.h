#pragma once
// Scalar reference row kernels defined outside dot_scalar.cpp (Q8_K activations), registered in
// its table: Q3_K, Q5_K (dot_q3_k_q5_k_scalar.cpp), IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
// (dot_iq2_iq3_scalar.cpp), IQ1_S, IQ1_M (dot_iq1_scalar.cpp).
#include <cstddef>
#include <cstdint>

namespace strata::cpu::scalar {

#define STRATA_SCALAR_DOT(name) \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out)
STRATA_SCALAR_DOT(dot_rows_q3_k);
STRATA_SCALAR_DOT(dot_rows_q5_k);
STRATA_SCALAR_DOT(dot_rows_iq2_xxs);
STRATA_SCALAR_DOT(dot_rows_iq2_xs);
STRATA_SCALAR_DOT(dot_rows_iq2_s);
STRATA_SCALAR_DOT(dot_rows_iq3_xxs);
STRATA_SCALAR_DOT(dot_rows_iq3_s);
STRATA_SCALAR_DOT(dot_rows_iq1_s);
STRATA_SCALAR_DOT(dot_rows_iq1_m);
#undef STRATA_SCALAR_DOT

}  // namespace strata::cpu::scalar
