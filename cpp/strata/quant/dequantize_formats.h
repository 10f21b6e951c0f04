#pragma once
// Per-family dequantization of whole blocks, called by dequantize_row (dequantize.cpp), which
// validates the type and length first. Each writes nb * 256 floats to y.
#include <cstdint>

#include "strata/quant/blocks.h"

namespace strata::quant::detail {

void dequant_q3_k(const BlockQ3_K* b, float* y, int64_t nb);        // dequantize_q3_k_q5_k.cpp
void dequant_q5_k(const BlockQ5_K* b, float* y, int64_t nb);        // dequantize_q3_k_q5_k.cpp
void dequant_iq2_xxs(const BlockIQ2_XXS* b, float* y, int64_t nb);  // dequantize_iq2_iq3.cpp
void dequant_iq2_xs(const BlockIQ2_XS* b, float* y, int64_t nb);    // dequantize_iq2_iq3.cpp
void dequant_iq2_s(const BlockIQ2_S* b, float* y, int64_t nb);      // dequantize_iq2_iq3.cpp
void dequant_iq3_xxs(const BlockIQ3_XXS* b, float* y, int64_t nb);  // dequantize_iq2_iq3.cpp
void dequant_iq3_s(const BlockIQ3_S* b, float* y, int64_t nb);      // dequantize_iq2_iq3.cpp
void dequant_iq1_s(const BlockIQ1_S* b, float* y, int64_t nb);      // dequantize_iq1.cpp
void dequant_iq1_m(const BlockIQ1_M* b, float* y, int64_t nb);      // dequantize_iq1.cpp

}  // namespace strata::quant::detail
