#pragma once
// Matrix-vector products over quantized weights: the engine's one entry point for every linear
// map. W is row-major, `rows` rows of `cols` elements of type `type` (row stride
// quant::row_bytes(type, cols)). Activations are converted internally to the form the type's dot
// kernel consumes (q8 blocks where ggml uses them) in scratch that is reused, never reallocated
// per call once warm. Dispatches to cpu::active_isa().
#include <cstdint>

#include "strata/quant/types.h"

namespace strata {
class ThreadPool;
}

namespace strata::cpu {

// y[r] = W[r,:] · x for r in [0, rows). pool may be nullptr (single thread).
void gemv(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* x, float* y,
          ThreadPool* pool);

// Y[i*rows + r] = W[r,:] · X[i*cols : (i+1)*cols] for i in [0, nx): one pass over the weights for
// several activation rows (prefill chunks, verification windows, the n hyper-connection streams).
// Row i's result is bitwise equal to gemv on X row i alone.
void gemm(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* X, int64_t nx,
          float* Y, ThreadPool* pool);

}  // namespace strata::cpu
