#include "strata/engine/multi_linear.h"

#include <algorithm>
#include <atomic>

#include "strata/cpu/gemv.h"
#include "strata/cpu/kernels.h"
#include "strata/engine/parallel.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {
namespace {

// Weight bytes per claimed block: big enough to amortise the claim, small enough to balance.
constexpr int64_t kBlockBytes = 32 * 1024;
// Rows per block are a multiple of this: the dot kernels take weight rows four at a time (a block
// of 30 rows would end in a slower 2-row group) and interleaved 8-row weight layouts need whole
// groups of 8.
constexpr int64_t kRowAlign = 8;
constexpr int64_t kMaxBlocks = int64_t{1} << 24;

}  // namespace

std::size_t activation_bytes(quant::GGMLType type, int64_t cols) { return cpu::activation_row_bytes(type, cols); }

void prepare_activations(quant::GGMLType type, const float* X, int64_t nx, int64_t cols, uint8_t* act) {
  cpu::quantize_activations(type, X, nx, cols, act);
}

bool same_activation(quant::GGMLType a, quant::GGMLType b) {
  return cpu::activation_type(a) == cpu::activation_type(b);
}

void run_linear_tasks(LinearTask* tasks, int n_tasks, ThreadPool* pool) {
  int64_t total_bytes = 0, n_blocks = 0;
  for (int t = 0; t < n_tasks; ++t) {
    LinearTask& k = tasks[t];
    const int64_t stride = static_cast<int64_t>(std::max<std::size_t>(k.w.row_stride, 1));
    k.kernel = &cpu::dot_kernel(k.w.type, cpu::active_isa());
    // Row blocks in whole kernel groups (16 rows for repacked weights: cpu/kernels.h row_align).
    k.rows_per_block = cpu::aligned_rows(
        *k.kernel, (std::max<int64_t>(1, kBlockBytes / stride) + kRowAlign - 1) / kRowAlign * kRowAlign);
    k.first_block = n_blocks;
    n_blocks += (k.w.rows + k.rows_per_block - 1) / k.rows_per_block;
    total_bytes += k.w.rows * stride * std::max<int64_t>(1, k.nx);
  }
  if (n_blocks > kMaxBlocks) throw_error(ErrorKind::Internal, "run_linear_tasks: too many blocks");
  // Blocks [b0, b1) as one cpu::dot_rows_tiled per task they touch (a task's blocks are consecutive
  // rows), which makes as few kernel calls as the kernel and the activation count allow; a call per
  // block repeated each call's setup for every 32 KiB (on a Zen 3, decode 1-2 % faster at one thread and
  // at two). Results never depend on how rows are split into calls (cpu/kernels.h).
  auto range = [tasks, n_tasks, n_blocks](int64_t b0, int64_t b1) {
    // The task holding block b0: the last one whose first block is <= b0.
    int lo = 0, hi = n_tasks - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (tasks[mid].first_block <= b0)
        lo = mid;
      else
        hi = mid - 1;
    }
    for (int t = lo; b0 < b1; ++t) {
      const LinearTask& k = tasks[t];
      const int64_t e = std::min(b1, t + 1 < n_tasks ? tasks[t + 1].first_block : n_blocks);
      const int64_t r0 = (b0 - k.first_block) * k.rows_per_block;
      const int64_t nr = std::min((e - k.first_block) * k.rows_per_block, k.w.rows) - r0;
      b0 = e;
      if (nr <= 0) continue;  // a task without rows
      cpu::dot_rows_tiled(
          *k.kernel, k.w.cols, k.w.row(r0), k.w.row_stride, nr, k.nx,
          [&k](int64_t i) {
            return static_cast<const void*>(k.act +
                                            static_cast<std::size_t>(k.act_rows ? k.act_rows[i] : i) * k.act_stride);
          },
          [&k, r0](int64_t i) { return k.y + (k.y_rows ? k.y_rows[i] : i) * k.y_stride + r0; });
    }
  };
  if (!pool || pool->size() == 1 || total_bytes < cpu::kParallelMinBytes) {
    range(0, n_blocks);
    return;
  }
  parallel_ranges(pool, n_blocks, 1, range);
}

std::size_t PreparedInput::arena_bytes(int64_t rows, int64_t cols) {
  // The f32 form is the largest (4 bytes per element); q8 forms are smaller.
  return static_cast<std::size_t>(std::max<int64_t>(rows, 1)) * 3 *
         static_cast<std::size_t>(std::max<int64_t>(cols, 1)) * 4;
}

void PreparedInput::reset(const float* X, int64_t nx, int64_t cols, uint8_t* arena) {
  x_ = X;
  nx_ = nx;
  cols_ = cols;
  arena_ = arena;
  slot_bytes_ =
      static_cast<std::size_t>(std::max<int64_t>(nx, 1)) * static_cast<std::size_t>(std::max<int64_t>(cols, 1)) * 4;
  n_forms_ = 0;
}

LinearTask PreparedInput::task(const model::Weight& w, float* y, int64_t y_stride) {
  LinearTask t;
  t.w = w;
  t.act = get(w.type, &t.act_stride);
  t.nx = nx_;
  t.y = y;
  t.y_stride = y_stride > 0 ? y_stride : w.rows;
  return t;
}

const uint8_t* PreparedInput::get(quant::GGMLType type, std::size_t* stride) {
  *stride = activation_bytes(type, cols_);
  for (int f = 0; f < n_forms_; ++f)
    if (same_activation(forms_[f], type)) return arena_ + static_cast<std::size_t>(f) * slot_bytes_;
  if (n_forms_ == 3) throw_error(ErrorKind::Internal, "PreparedInput: more than three activation forms");
  uint8_t* out = arena_ + static_cast<std::size_t>(n_forms_) * slot_bytes_;
  prepare_activations(type, x_, nx_, cols_, out);
  forms_[n_forms_++] = type;
  return out;
}

}  // namespace strata::engine
