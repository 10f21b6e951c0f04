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
void gemv(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* x, float* y, ThreadPool* pool);

// Y[i*rows + r] = W[r,:] · X[i*cols : (i+1)*cols] for i in [0, nx): one pass over the weights for
// several activation rows (prefill chunks, verification windows, the n hyper-connection streams).
// Row i's result is bitwise equal to gemv on X row i alone.
void gemm(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* X, int64_t nx, float* Y,
          ThreadPool* pool);

// One row's dot with x (n elements): exactly what gemv computes for that row, on this thread.
float dot(quant::GGMLType type, const void* w, const float* x, int64_t n);

// For several products over the same input (an expert's gate and up projections, all experts of
// a token): convert X (nx rows of cols) once to the activation form of `type`'s kernels —
// nx rows of activation_row_bytes(type, cols) bytes (cpu/kernels.h) — then multiply with
// gemm_prepared. gemm == quantize_activations + gemm_prepared, bitwise.
void quantize_activations(quant::GGMLType type, const float* X, int64_t nx, int64_t cols, void* act);
void gemm_prepared(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const void* act, int64_t nx,
                   float* Y, ThreadPool* pool);

// Threading: the rows are split over pool only when the weights exceed kParallelMinBytes, in
// chunks of at least kParallelChunkBytes, so small matrices stay on the calling thread. Do not
// pass a pool from inside one of that pool's own jobs (pass nullptr there).
inline constexpr int64_t kParallelMinBytes = 128 * 1024;
inline constexpr int64_t kParallelChunkBytes = 32 * 1024;

}  // namespace strata::cpu
