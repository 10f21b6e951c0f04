#pragma once
// Linear maps of the forward pass through the CPU kernels (cpu/gemv.h): Y[r] = W · X[r] for nx rows.
// gemm's row r is bitwise equal to gemv on row r alone, so a row's result never depends on the
// batch it ran in (prefill chunking, verification windows and decode agree bit for bit).
#include <cstdint>

#include "strata/cpu/gemv.h"
#include "strata/model/weights.h"

namespace strata::engine {

inline void linear(const model::Weight& w, const float* X, int64_t nx, float* Y, ThreadPool* pool) {
  if (nx <= 0) return;
  if (nx == 1)
    cpu::gemv(w.type, w.data, w.rows, w.cols, X, Y, pool);
  else
    cpu::gemm(w.type, w.data, w.rows, w.cols, X, nx, Y, pool);
}

// An F32 matrix held as a plain pointer (hyper-connection maps) as a Weight.
inline model::Weight f32_weight(const float* data, int64_t rows, int64_t cols) {
  return model::Weight{quant::GGMLType::F32, reinterpret_cast<const uint8_t*>(data), rows, cols,
                       static_cast<std::size_t>(cols) * sizeof(float)};
}

// Row `row` of w as floats (token embeddings).
void dequantize_weight_row(const model::Weight& w, int64_t row, float* out);

}  // namespace strata::engine
