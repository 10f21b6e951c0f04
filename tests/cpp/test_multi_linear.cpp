// Several linear maps in one dispatch (engine/multi_linear): every output row of every task is bitwise what
// cpu::gemv of that task's weight gives for the activation row it reads, whatever the pool (none, 1, 2 or 3
// threads) and the ISA path. The tasks mix repacked and plain formats, f32 / Q8_0 / Q8_K activation forms,
// row counts that end in a partial block, and a task that reads and writes scattered rows (a routed expert),
// so the claimed ranges of blocks start, end and cross tasks at every kind of boundary.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/gemv.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/engine/multi_linear.h"
#include "strata/util/thread_pool.h"
#include "test_quant_util.h"

namespace {

using namespace quant_test;
namespace cpu = strata::cpu;
namespace engine = strata::engine;

struct Matrix {
  GGMLType type;
  int64_t rows;
  std::vector<uint8_t> data;
};

Matrix make(GGMLType plain, bool repack, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m{plain, rows, random_rows(plain, rows, cols, rng)};
  if (repack) {
    m.type = cpu::repacked_type(plain);
    m.data = repacked(plain, m.data, rows, cols);
  }
  return m;
}

// One run_linear_tasks dispatch of a task per matrix over the nx rows of X (cols each); adjust(t, task)
// may change task t before the run. Returns each task's output rows (nx · rows floats, -1 where unwritten).
template <class Adjust>
std::vector<std::vector<float>> run_tasks(const std::vector<Matrix>& mats, const std::vector<float>& X, int64_t nx,
                                          int64_t cols, strata::ThreadPool* pool, Adjust&& adjust) {
  std::vector<uint8_t> arena(engine::PreparedInput::arena_bytes(nx, cols));
  engine::PreparedInput in;
  in.reset(X.data(), nx, cols, arena.data());
  std::vector<std::vector<float>> got(mats.size());
  std::vector<engine::LinearTask> tasks;
  for (std::size_t t = 0; t < mats.size(); ++t) {
    const Matrix& m = mats[t];
    got[t].assign(static_cast<std::size_t>(nx * m.rows), -1.0f);
    const strata::model::Weight w{m.type, m.data.data(), m.rows, cols, strata::quant::row_bytes(m.type, cols)};
    engine::LinearTask task = in.task(w, got[t].data());
    adjust(t, task);
    tasks.push_back(task);
  }
  engine::run_linear_tasks(tasks.data(), static_cast<int>(tasks.size()), pool);
  return got;
}

}  // namespace

TEST(linear_tasks_equal_gemv_per_row_for_every_pool_and_path) {
  IsaGuard guard;
  std::mt19937 rng(43);
  constexpr int64_t cols = 1024, nx = 3;
  std::vector<Matrix> mats;
  mats.push_back(make(GGMLType::Q4_0, true, 208, cols, rng));   // 64-row blocks: 64, 64, 64, 16
  mats.push_back(make(GGMLType::Q8_0, false, 100, cols, rng));  // 32-row blocks, the last of 4 rows
  mats.push_back(make(GGMLType::F32, false, 40, cols, rng));    // f32 activations, 8-row blocks
  mats.push_back(make(GGMLType::Q4_K, true, 48, cols, rng));    // Q8_K activations
  mats.push_back(make(GGMLType::Q8_0, true, 160, cols, rng));
  const auto X = random_floats(nx * cols, rng);
  // Task 1 reads prepared rows {2, 0} and writes output rows {1, 0}: the scatter of a routed expert.
  const int32_t act_rows[2] = {2, 0}, y_rows[2] = {1, 0};
  strata::ThreadPool pool1(1), pool2(2), pool3(3);
  strata::ThreadPool* pools[] = {nullptr, &pool1, &pool2, &pool3};
  int checked = 0;
  for (cpu::Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    // Wanted: each task's rows by cpu::gemv of the activation row the task reads.
    std::vector<std::vector<float>> want(mats.size());
    for (std::size_t t = 0; t < mats.size(); ++t) {
      const Matrix& m = mats[t];
      want[t].assign(static_cast<std::size_t>(nx * m.rows), -1.0f);
      const int64_t n_read = t == 1 ? 2 : nx;
      for (int64_t i = 0; i < n_read; ++i) {
        const int64_t ar = t == 1 ? act_rows[i] : i, yr = t == 1 ? y_rows[i] : i;
        cpu::gemv(m.type, m.data.data(), m.rows, cols, X.data() + ar * cols, want[t].data() + yr * m.rows, nullptr);
      }
    }
    for (strata::ThreadPool* pool : pools) {
      const auto got = run_tasks(mats, X, nx, cols, pool, [&](std::size_t t, engine::LinearTask& task) {
        if (t == 1) {
          task.act_rows = act_rows;
          task.y_rows = y_rows;
          task.nx = 2;
        }
      });
      for (std::size_t t = 0; t < mats.size(); ++t) {
        const std::string l = std::string(cpu::isa_name(isa)) + " / " + strata::quant::type_name(mats[t].type) +
                              " / threads " + std::to_string(pool ? pool->size() : 0);
        CHECK_MSG(std::memcmp(got[t].data(), want[t].data(), got[t].size() * 4) == 0, l);
        ++checked;
      }
    }
  }
  CHECK(checked >= 20);
}

// More activation rows than one kernel call takes (act_group: 8, or 16 with AMX): a repacked matrix of
// many tiles (cpu::kActTileBytes: 112 rows of 4096 Q4_0 columns), so that with two threads a claimed
// range spans several tiles from an offset, and a plain one; each row bitwise cpu::gemv's.
TEST(linear_tasks_with_more_activations_than_one_call_equal_gemv) {
  IsaGuard guard;
  std::mt19937 rng(44);
  constexpr int64_t cols = 4096, nx = 19;
  std::vector<Matrix> mats;
  mats.push_back(make(GGMLType::Q4_0, true, 1008, cols, rng));  // 2.3 MB: nine tiles
  mats.push_back(make(GGMLType::Q8_0, false, 100, cols, rng));
  const auto X = random_floats(nx * cols, rng);
  strata::ThreadPool pool2(2);
  strata::ThreadPool* pools[] = {nullptr, &pool2};
  int checked = 0;
  for (cpu::Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    for (strata::ThreadPool* pool : pools) {
      const auto got = run_tasks(mats, X, nx, cols, pool, [](std::size_t, engine::LinearTask&) {});
      for (std::size_t t = 0; t < mats.size(); ++t) {
        const Matrix& m = mats[t];
        std::vector<float> want(static_cast<std::size_t>(m.rows));
        for (int64_t i = 0; i < nx; ++i) {
          cpu::gemv(m.type, m.data.data(), m.rows, cols, X.data() + i * cols, want.data(), nullptr);
          CHECK_MSG(std::memcmp(got[t].data() + i * m.rows, want.data(), want.size() * 4) == 0,
                    std::string(cpu::isa_name(isa)) + " / " + strata::quant::type_name(m.type) + " / row " +
                        std::to_string(i) + " / threads " + std::to_string(pool ? pool->size() : 0));
          ++checked;
        }
      }
    }
  }
  CHECK(checked == static_cast<int>(runnable_isas().size()) * 2 * 2 * static_cast<int>(nx));
}

// cpu::for_each_act_call visits every (weight row, activation) pair once, in tiles that start at multiples
// of the kernel's row alignment: every row in one call for a single activation, and for the repacked
// kernels with a several-activation form (AVX2, AVX-512) while the activations fit one call; tiles of
// kActTileBytes of weights in whole row_align groups otherwise (plain kernels, the scalar path's
// repacked kernels, more activations than one call takes).
TEST(act_calls_cover_each_row_and_activation_once) {
  IsaGuard guard;
  for (cpu::Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    const int64_t group = cpu::act_group();
    const bool multi_isa = isa == cpu::Isa::Avx2 || isa == cpu::Isa::Avx512;
    for (GGMLType plain : {GGMLType::Q4_0, GGMLType::Q8_0, GGMLType::Q4_K}) {
      for (bool rep : {false, true}) {
        const GGMLType type = rep ? cpu::repacked_type(plain) : plain;
        const cpu::DotKernel& k = cpu::dot_kernel(type, isa);
        const bool once = rep && multi_isa;  // written out, not cpu::reads_rows_once_per_call
        CHECK_MSG(cpu::reads_rows_once_per_call(k) == once,
                  std::string(cpu::isa_name(isa)) + " / " + strata::quant::type_name(type) + ": classified");
        for (int64_t cols : {256, 4096})
          for (int64_t nrows : {16, 100, 1000, 5000})
            for (int64_t nx : {int64_t{1}, int64_t{2}, group, group + 1, 2 * group + 3}) {
              const std::size_t stride = strata::quant::row_bytes(type, cols);
              std::vector<int> seen(static_cast<std::size_t>(nrows * nx), 0);
              int calls = 0;
              bool aligned = true, within = true;
              int64_t max_rows = 0;
              cpu::for_each_act_call(k, stride, nrows, nx, [&](int64_t r0, int64_t n, int64_t i0, int na) {
                ++calls;
                aligned = aligned && r0 % k.row_align == 0 && n > 0 && na > 0 && na <= group;
                max_rows = std::max(max_rows, n);
                for (int64_t r = r0; r < r0 + n; ++r)
                  for (int64_t i = i0; i < i0 + na; ++i) {
                    within = within && r < nrows && i < nx;
                    if (r < nrows && i < nx) ++seen[static_cast<std::size_t>(i * nrows + r)];
                  }
              });
              const std::string l = std::string(cpu::isa_name(isa)) + " / " + strata::quant::type_name(type) +
                                    " / cols " + std::to_string(cols) + " / rows " + std::to_string(nrows) + " / nx " +
                                    std::to_string(nx);
              CHECK_MSG(aligned && within, l);
              CHECK_MSG(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }), l + ": each pair once");
              const int64_t groups = (nx + group - 1) / group;
              if (nx == 1 || (once && nx <= group)) {
                CHECK_MSG(calls == groups && max_rows == nrows, l + ": one call over every row");
              } else {
                const int64_t tile = std::max<int64_t>(
                    k.row_align, static_cast<int64_t>(cpu::kActTileBytes / stride) / k.row_align * k.row_align);
                CHECK_MSG(max_rows == std::min(nrows, tile), l + ": tiles of kActTileBytes");
                CHECK_MSG(calls == (nrows + tile - 1) / tile * groups, l + ": calls");
              }
            }
      }
    }
  }
}
