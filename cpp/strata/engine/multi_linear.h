#pragma once
// Several linear maps in ONE parallel dispatch. A decode row's attention projections (q, k, v and
// the indexer's three) or a small batch's routed and shared experts would otherwise be a dozen or
// more separate GEMVs, each waking the thread pool; here every task is split into row blocks and all
// blocks of all tasks are claimed dynamically by the workers.
//
// Activations are converted once per (input, kernel activation form) by prepare_activations and
// shared by every task that reads them; tasks may read a subset of the prepared rows (the rows
// routed to an expert) and scatter their outputs. Every output row is computed by the weight type's
// dot kernel in the calls cpu::dot_rows_tiled makes over the rows a worker claimed, so it is bitwise
// equal to cpu::gemv of that row (cpu/kernels.h: a row's result never depends on the split;
// test_multi_linear checks it).
#include <cstddef>
#include <cstdint>

#include "strata/model/weights.h"

namespace strata {
class ThreadPool;
}
namespace strata::cpu {
struct DotKernel;
}

namespace strata::engine {

// Bytes of one prepared activation row of `cols` elements for weights of `type`.
std::size_t activation_bytes(quant::GGMLType type, int64_t cols);
// X (nx rows of cols floats) -> act (nx rows of activation_bytes(type, cols)).
void prepare_activations(quant::GGMLType type, const float* X, int64_t nx, int64_t cols, uint8_t* act);
// True when weights of types a and b consume the same activation form (one preparation serves both).
bool same_activation(quant::GGMLType a, quant::GGMLType b);

struct LinearTask {
  model::Weight w;                    // [rows, cols]
  const uint8_t* act = nullptr;       // prepared activations for w.type
  std::size_t act_stride = 0;         // bytes between prepared rows
  const int32_t* act_rows = nullptr;  // which prepared rows (nullptr: 0 .. nx-1)
  int64_t nx = 1;
  float* y = nullptr;  // output row i at y + out_row(i) * y_stride, w.rows floats
  int64_t y_stride = 0;
  const int32_t* y_rows = nullptr;  // nullptr: i
  // Filled by run_linear_tasks.
  const cpu::DotKernel* kernel = nullptr;
  int64_t rows_per_block = 0;
  int64_t first_block = 0;
};

// Runs every task; one dispatch (inline when the total weight bytes are small).
void run_linear_tasks(LinearTask* tasks, int n_tasks, ThreadPool* pool);

// One input matrix X prepared on demand for each activation form its readers need (at most three:
// f32, q8_0 blocks, q8_K blocks), in a caller-owned arena of rows · 3 · max_activation_bytes(cols).
class PreparedInput {
 public:
  static std::size_t arena_bytes(int64_t rows, int64_t cols);
  void reset(const float* X, int64_t nx, int64_t cols, uint8_t* arena);
  // Prepared rows for weights of `type` (converted on first request); stride = bytes per row.
  const uint8_t* get(quant::GGMLType type, std::size_t* stride);
  // A task multiplying every prepared row by w into y (row i at y + i·y_stride; 0 = w.rows floats).
  LinearTask task(const model::Weight& w, float* y, int64_t y_stride = 0);

 private:
  const float* x_ = nullptr;
  int64_t nx_ = 0, cols_ = 0;
  uint8_t* arena_ = nullptr;
  std::size_t slot_bytes_ = 0;
  int n_forms_ = 0;
  quant::GGMLType forms_[3] = {};
};

}  // namespace strata::engine
