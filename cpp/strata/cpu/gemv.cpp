// GEMV / GEMM entry points: validate, convert the activations once into per-thread scratch that
// only ever grows, then split the weight rows over the pool. No allocation once warm.
#include "strata/cpu/gemv.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/cpu/kernels.h"
#include "strata/util/aligned.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::cpu {
namespace {

// Activation scratch of the calling thread, reused by every call on it.
thread_local AlignedBuffer<uint8_t> t_act_scratch;

void check_shape(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const void* X, int64_t nx,
                 const float* Y) {
  if (rows < 0 || cols < 0 || nx < 0)
    throw_error(ErrorKind::Value, "gemv: negative size (rows " + std::to_string(rows) + ", cols " +
                                      std::to_string(cols) + ", activations " + std::to_string(nx) + ")");
  (void)activation_row_bytes(type, cols);  // supported type, cols a multiple of its block
  if ((rows > 0 && cols > 0 && W == nullptr) || (nx > 0 && cols > 0 && X == nullptr) ||
      (rows > 0 && nx > 0 && Y == nullptr))
    throw_error(ErrorKind::Value, "gemv: null data pointer");
}

struct Job {
  const DotKernel* kernel;
  const uint8_t* w;
  std::size_t w_stride;
  int64_t rows, cols;
  const uint8_t* act;
  std::size_t act_stride;
  int64_t nx;
  float* y;

  // Rows [r0, r1) in the kernel calls cpu::dot_rows_tiled chooses (kernels.h).
  void run(int64_t r0, int64_t r1) const {
    dot_rows_tiled(
        *kernel, cols, w + static_cast<std::size_t>(r0) * w_stride, w_stride, r1 - r0, nx,
        [this](int64_t i) { return static_cast<const void*>(act + static_cast<std::size_t>(i) * act_stride); },
        [this, r0](int64_t i) { return y + i * rows + r0; });
  }
};

void run_job(const Job& job, ThreadPool* pool) {
  const int64_t weight_bytes = job.rows * static_cast<int64_t>(job.w_stride);
  if (pool == nullptr || pool->size() == 1 || weight_bytes < kParallelMinBytes) {
    job.run(0, job.rows);
    return;
  }
  // Split in units of the kernel's row alignment (16-row groups for repacked weights).
  const int64_t align = job.kernel->row_align;
  const int64_t units = (job.rows + align - 1) / align;
  const int64_t grain =
      std::max<int64_t>(1, kParallelChunkBytes / std::max<int64_t>(1, static_cast<int64_t>(job.w_stride) * align));
  const Job* jp = &job;  // the closure holds one pointer: std::function keeps it inline, no allocation
  pool->parallel_for(units, grain, [jp](int64_t b, int64_t e) {
    const int64_t a = jp->kernel->row_align;
    jp->run(b * a, std::min(e * a, jp->rows));
  });
}

}  // namespace

void quantize_activations(quant::GGMLType type, const float* X, int64_t nx, int64_t cols, void* act) {
  const DotKernel& k = dot_kernel(type, active_isa());
  const std::size_t stride = activation_row_bytes(type, cols);
  auto* out = static_cast<uint8_t*>(act);
  for (int64_t i = 0; i < nx; ++i) {
    if (k.quantize_act == nullptr) {
      std::memcpy(out + static_cast<std::size_t>(i) * stride, X + i * cols, stride);
    } else {
      k.quantize_act(X + i * cols, out + static_cast<std::size_t>(i) * stride, cols);
    }
  }
}

void gemm_prepared(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const void* act, int64_t nx,
                   float* Y, ThreadPool* pool) {
  check_shape(type, W, rows, cols, act, nx, Y);
  if (rows == 0 || nx == 0) return;
  if (cols == 0) {
    std::fill(Y, Y + rows * nx, 0.0f);
    return;
  }
  const Job job{&dot_kernel(type, active_isa()),
                static_cast<const uint8_t*>(W),
                quant::row_bytes(type, cols),
                rows,
                cols,
                static_cast<const uint8_t*>(act),
                activation_row_bytes(type, cols),
                nx,
                Y};
  run_job(job, pool);
}

void gemm(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* X, int64_t nx, float* Y,
          ThreadPool* pool) {
  check_shape(type, W, rows, cols, X, nx, Y);
  if (rows == 0 || nx == 0) return;
  if (cols == 0) {
    std::fill(Y, Y + rows * nx, 0.0f);
    return;
  }
  const DotKernel& k = dot_kernel(type, active_isa());
  const uint8_t* act = reinterpret_cast<const uint8_t*>(X);
  if (k.quantize_act != nullptr) {
    t_act_scratch.resize(static_cast<std::size_t>(nx) * activation_row_bytes(type, cols));
    quantize_activations(type, X, nx, cols, t_act_scratch.data());
    act = t_act_scratch.data();
  }
  const Job job{&k,
                static_cast<const uint8_t*>(W),
                quant::row_bytes(type, cols),
                rows,
                cols,
                act,
                activation_row_bytes(type, cols),
                nx,
                Y};
  run_job(job, pool);
}

void gemv(quant::GGMLType type, const void* W, int64_t rows, int64_t cols, const float* x, float* y, ThreadPool* pool) {
  gemm(type, W, rows, cols, x, 1, y, pool);
}

float dot(quant::GGMLType type, const void* w, const float* x, int64_t n) {
  float out = 0.0f;
  gemm(type, w, 1, n, x, 1, &out, nullptr);
  return out;
}

}  // namespace strata::cpu
