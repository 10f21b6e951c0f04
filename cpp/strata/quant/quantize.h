#pragma once
// Quantizers: f32 rows to block formats.
//
// - F32 / F16 / BF16: element-wise conversion (round to nearest even; bf16 keeps NaN quiet).
// - Q8_0, Q5_0, Q4_0 with QuantMethod::Ggml: ggml's reference rules, byte-identical to
//   gguf.quants.quantize (Q8_0: d = amax/127, q = roundf(x/d); Q5_0 / Q4_0: d = max/-16 / max/-8
//   where max is the signed value of largest magnitude, q = trunc(x/d + 16.5 / 8.5) clamped).
// - Q5_1: ggml's rule, byte-identical to gguf.quants.quantize: d = (max - min)/31, m = min,
//   q = trunc((x - min)/d + 0.5) clamped to 31.
// - Q4_0 with QuantMethod::Lloyd (SPEC R-11): per block, Lloyd iterations (assign each value to
//   its nearest grid level, then refit the scale by least squares) from several starting scales
//   of both signs, the fp16 scale refined over its neighbouring half values, and the result kept
//   only where its squared error is below the ggml rule's on the same block: never worse.
// - Q8_K: the activation form of the K-quant dots (not a storage format).
#include <cstdint>

#include "strata/quant/blocks.h"
#include "strata/quant/types.h"

namespace strata {
class ThreadPool;
}

namespace strata::quant {

enum class QuantMethod { Ggml, Lloyd };

// One row of n elements (a multiple of the block) into dst (row_bytes(type, n) bytes). Throws
// strata::Error(Value) for a type without a quantizer, a bad n, or Lloyd on a type other than Q4_0.
void quantize_row(GGMLType type, const float* src, void* dst, int64_t n, QuantMethod method = QuantMethod::Ggml);

// A row-major rows x cols matrix; rows are spread over pool (nullptr: this thread).
void quantize_matrix(GGMLType type, const float* src, int64_t rows, int64_t cols, void* dst, QuantMethod method,
                     ThreadPool* pool);

// Whether quantize_row accepts (type, method); require_quantizer throws the error it would.
bool has_quantizer(GGMLType type, QuantMethod method);
void require_quantizer(GGMLType type, QuantMethod method);

// The individual rules (n a multiple of 32 / 256).
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_0_lloyd(const float* x, BlockQ4_0* y, int64_t n);
// Q8_K activations: iscale = 127/amax, q = round-half-even(x*iscale), d = 1/iscale, bsums per 16.
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);

// Squared error of one Q4_0 block against the 32 values it encodes, computed from exactly the
// values dequantize_row produces.
double q4_0_block_sq_error(const float* x, const BlockQ4_0& b);

}  // namespace strata::quant
