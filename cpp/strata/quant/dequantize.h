#pragma once
// Dequantization of one row of any supported block format to f32. The result is bitwise equal to
// gguf.quants.dequantize (and ggml's dequantize_row_*): every element is computed with the same
// float operations in the same order, no fused multiply-add.
#include <cstdint>

#include "strata/quant/types.h"

namespace strata::quant {

// n elements (a multiple of the type's block) from src (row_bytes(type, n) bytes) to dst.
// Throws strata::Error(Value) for a type without kernels or a bad n.
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n);

}  // namespace strata::quant
