#pragma once
// The i8mm (SMMLA) kernels of this folder, gathered into the neon-i8mm table by kernels_i8mm.cpp.
#include <cstddef>
#include <cstdint>

namespace strata::cpu::neon_i8mm {

#define STRATA_I8MM_DOT(name) \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out)
#define STRATA_I8MM_DOT_MULTI(name)                                                                         \
  void name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact, \
            float* const* outs)
STRATA_I8MM_DOT(dot_rows_q4_0);
STRATA_I8MM_DOT(dot_rows_q5_0);
STRATA_I8MM_DOT(dot_rows_q8_0);
STRATA_I8MM_DOT(dot_rows_q4_k);  // dot_q4_k_i8mm.cpp
STRATA_I8MM_DOT(dot_rows_q6_k);  // dot_q6_k_i8mm.cpp
STRATA_I8MM_DOT_MULTI(dot_rows_multi_q4_0);
STRATA_I8MM_DOT_MULTI(dot_rows_multi_q5_0);
STRATA_I8MM_DOT_MULTI(dot_rows_multi_q8_0);
STRATA_I8MM_DOT_MULTI(dot_rows_multi_q4_k);
STRATA_I8MM_DOT_MULTI(dot_rows_multi_q6_k);
#undef STRATA_I8MM_DOT
#undef STRATA_I8MM_DOT_MULTI

}  // namespace strata::cpu::neon_i8mm
