// Repacked weights (cpu/repack): Q4_0 / Q5_0 / Q8_0 / Q2_K .. Q6_K / IQ4_XS / IQ4_NL matrices in 16-row
// interleaved groups. On every ISA this machine runs, a repacked matrix gives per row bitwise the
// plain type's SCALAR kernel result (same integer block sums, same f32 order) — through dot_rows,
// the multi-activation kernels, gemv / gemm / gemm_prepared, threaded or not; the expert store's
// in-place repack equals the copying one; shapes without a repacked form are refused with a clear
// error; the settings decide as documented; no heap allocation once warm.
#define STRATA_TEST_MAIN
#include "check.h"

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <new>

#include "strata/cpu/features.h"
#include "strata/cpu/gemv.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"
#include "test_quant_util.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
static std::atomic<long> g_allocations{0};
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace quant_test;
using strata::cpu::Isa;
namespace cpu = strata::cpu;

std::string label(GGMLType t, Isa isa, int64_t rows, int64_t cols) {
  return std::string(strata::quant::type_name(t)) + " / " + cpu::isa_name(isa) + " / " + std::to_string(rows) + "x" +
         std::to_string(cols);
}

const GGMLType kPlain[] = {GGMLType::Q4_0,   GGMLType::Q5_0,   GGMLType::Q8_0, GGMLType::Q2_K,
                           GGMLType::Q3_K,   GGMLType::Q4_K,   GGMLType::Q5_K, GGMLType::Q6_K,
                           GGMLType::IQ4_XS, GGMLType::IQ4_NL, GGMLType::Q5_1};

bool super_block(GGMLType t) { return strata::quant::block_size(t) == 256; }

// Column counts to test: with and without a tail of the kernels' unrolled loops (an odd block count:
// the Q4_0 / Q5_0 / Q8_0 layout's lone last block), and rows longer than the 256 blocks whose activation
// terms the AVX-512 kernels prepare once per call (8224 columns: computed per group instead).
std::vector<int64_t> test_cols(GGMLType t) {
  if (super_block(t)) return {256, 512, 1280};
  return {32, 96, 256, 1056, 8224};
}

}  // namespace

TEST(repacked_paths_under_test) {
  for (GGMLType t : kPlain) {
    const GGMLType rt = cpu::repacked_type(t);
    std::string names;
    for (Isa isa : runnable_isas()) {
      const cpu::DotKernel& k = cpu::dot_kernel(rt, isa);
      const bool own = k.dot_rows != cpu::dot_kernel(rt, Isa::Scalar).dot_rows;
      names += std::string(" ") + cpu::isa_name(isa) + (own || isa == Isa::Scalar ? "" : "(reference)");
    }
    std::printf("%s kernels under test:%s\n", strata::quant::type_name(rt), names.c_str());
  }
  CHECK(cpu::repacked_type(GGMLType::Q4_0) == GGMLType::Q4_0_R16);
  CHECK(cpu::repacked_type(GGMLType::Q8_0) == GGMLType::Q8_0_R16);
  CHECK(cpu::plain_type(GGMLType::Q8_0_R16) == GGMLType::Q8_0);
  CHECK(cpu::repacked_type(GGMLType::Q4_K) == GGMLType::Q4_K_R16);
  CHECK(cpu::plain_type(GGMLType::Q4_K_R16) == GGMLType::Q4_K);
  CHECK(cpu::repacked_type(GGMLType::Q6_K) == GGMLType::Q6_K_R16);
  CHECK(cpu::repacked_type(GGMLType::IQ4_XS) == GGMLType::IQ4_XS_R16);
  CHECK(cpu::plain_type(GGMLType::IQ4_XS_R16) == GGMLType::IQ4_XS);
  CHECK(strata::quant::row_bytes(GGMLType::IQ4_XS_R16, 512) == strata::quant::row_bytes(GGMLType::IQ4_XS, 512));
  CHECK(!strata::quant::type_from_name("IQ4_XS_R16").has_value());
  CHECK(cpu::repacked_type(GGMLType::Q5_K) == GGMLType::Q5_K_R16);
  CHECK(cpu::plain_type(GGMLType::Q5_K_R16) == GGMLType::Q5_K);
  CHECK(strata::quant::row_bytes(GGMLType::Q5_K_R16, 512) == strata::quant::row_bytes(GGMLType::Q5_K, 512));
  CHECK(cpu::repacked_type(GGMLType::Q3_K) == GGMLType::Q3_K_R16);
  CHECK(cpu::plain_type(GGMLType::Q3_K_R16) == GGMLType::Q3_K);
  CHECK(strata::quant::row_bytes(GGMLType::Q3_K_R16, 512) == strata::quant::row_bytes(GGMLType::Q3_K, 512));
  CHECK(cpu::repacked_type(GGMLType::Q2_K) == GGMLType::Q2_K_R16);
  CHECK(cpu::plain_type(GGMLType::Q2_K_R16) == GGMLType::Q2_K);
  CHECK(strata::quant::row_bytes(GGMLType::Q2_K_R16, 512) == strata::quant::row_bytes(GGMLType::Q2_K, 512));
  CHECK(cpu::repacked_type(GGMLType::IQ2_XS) == GGMLType::IQ2_XS);  // no repacked form
  CHECK(!cpu::is_repacked(GGMLType::Q8_0));
  // Same bytes per row as the plain type; never a file type.
  CHECK(strata::quant::row_bytes(GGMLType::Q4_0_R16, 256) == strata::quant::row_bytes(GGMLType::Q4_0, 256));
  CHECK(strata::quant::row_bytes(GGMLType::Q8_0_R16, 256) == strata::quant::row_bytes(GGMLType::Q8_0, 256));
  CHECK(strata::quant::row_bytes(GGMLType::Q4_K_R16, 512) == strata::quant::row_bytes(GGMLType::Q4_K, 512));
  CHECK(strata::quant::row_bytes(GGMLType::Q6_K_R16, 512) == strata::quant::row_bytes(GGMLType::Q6_K, 512));
  CHECK(!strata::quant::type_from_name("Q4_K_R16").has_value());
  CHECK(!strata::quant::type_from_id(0x1002).has_value());
  CHECK(!strata::quant::type_from_name("Q4_0_R16").has_value());
  CHECK(cpu::dot_kernel(GGMLType::Q8_0_R16, Isa::Scalar).row_align == cpu::kRepackRows);
}

// Every (row, activation) of every path equals the plain scalar kernel bitwise, for block counts
// with and without a tail of the kernels' unrolled loops, and 1..18 activations.
TEST(repacked_dots_equal_the_plain_scalar_kernel_bitwise) {
  std::mt19937 rng(21);
  for (GGMLType t : kPlain) {
    const GGMLType rt = cpu::repacked_type(t);
    for (int64_t cols : test_cols(t)) {
      for (int64_t rows : {16, 48, 80}) {
        const auto w = random_rows(t, rows, cols, rng);
        const auto wr = repacked(t, w, rows, cols);
        const std::size_t stride = strata::quant::row_bytes(t, cols);
        const int nx = 18;  // > 16: the AVX-512 kernels take 16 activations at a time
        const auto X = random_floats(nx * cols, rng);
        const cpu::DotKernel& ref = cpu::dot_kernel(t, Isa::Scalar);
        const std::size_t ab = cpu::activation_row_bytes(t, cols);
        CHECK(ab == cpu::activation_row_bytes(rt, cols));
        std::vector<uint8_t> act(static_cast<std::size_t>(nx) * ab);
        for (int i = 0; i < nx; ++i) ref.quantize_act(X.data() + i * cols, act.data() + i * ab, cols);
        std::vector<float> want(static_cast<std::size_t>(nx * rows));
        for (int i = 0; i < nx; ++i)
          ref.dot_rows(cols, w.data(), stride, rows, act.data() + i * ab, want.data() + i * rows);
        for (Isa isa : runnable_isas()) {
          const cpu::DotKernel& k = cpu::dot_kernel(rt, isa);
          std::vector<float> got(want.size(), -1.0f);
          for (int i = 0; i < nx; ++i)
            k.dot_rows(cols, wr.data(), stride, rows, act.data() + i * ab, got.data() + i * rows);
          CHECK_MSG(std::memcmp(got.data(), want.data(), got.size() * 4) == 0,
                    label(rt, isa, rows, cols) + " dot_rows");
          // A call covering a whole number of groups from a group boundary (a thread's share).
          if (rows >= 32) {
            std::vector<float> part(16, -1.0f);
            k.dot_rows(cols, wr.data() + 16 * stride, stride, 16, act.data(), part.data());
            CHECK_MSG(std::memcmp(part.data(), want.data() + 16, 64) == 0,
                      label(rt, isa, rows, cols) + " second group");
          }
          for (int na = 1; na <= nx; ++na) {
            const void* acts[nx];
            float* outs[nx];
            std::vector<float> multi(static_cast<std::size_t>(na * rows), -1.0f);
            for (int a = 0; a < na; ++a) {
              acts[a] = act.data() + static_cast<std::size_t>(nx - 1 - a) * ab;
              outs[a] = multi.data() + a * rows;
            }
            cpu::dot_rows_acts(k, cols, wr.data(), stride, rows, acts, na, outs);
            for (int a = 0; a < na; ++a)
              CHECK_MSG(std::memcmp(multi.data() + a * rows, want.data() + (nx - 1 - a) * rows, rows * 4) == 0,
                        label(rt, isa, rows, cols) + " " + std::to_string(na) + " activations, #" + std::to_string(a));
          }
        }
      }
    }
  }
}

// The public entry points dispatch on the repacked type: gemv / gemm / gemm_prepared, with and
// without threads (the row split honours the 16-row groups), equal the plain scalar gemm.
TEST(gemv_and_gemm_of_repacked_weights_equal_plain_scalar_threaded_or_not) {
  IsaGuard guard;
  std::mt19937 rng(22);
  strata::ThreadPool pool(3);
  // 5 activations: one kernel call over each thread's rows. 19 over 4096 columns: tiles of rows
  // (cpu::act_tile_rows: ~100 rows of these widths) each passed by several groups of activations, and a
  // thread's claimed rows span several tiles from wherever its claim starts.
  for (const auto& [nx, cols] : {std::pair<int64_t, int64_t>{5, 512}, {19, 4096}})
    for (GGMLType t : kPlain) {
      const GGMLType rt = cpu::repacked_type(t);
      const int64_t rows = 1024;  // > kParallelMinBytes: the threaded path
      const auto w = random_rows(t, rows, cols, rng);
      const auto wr = repacked(t, w, rows, cols);
      const auto X = random_floats(nx * cols, rng);
      cpu::force_isa(Isa::Scalar);
      std::vector<float> want(static_cast<std::size_t>(nx * rows));
      cpu::gemm(t, w.data(), rows, cols, X.data(), nx, want.data(), nullptr);
      for (Isa isa : runnable_isas()) {
        cpu::force_isa(isa);
        std::vector<float> Y(want.size()), Yt(want.size()), Yp(want.size()), y1(static_cast<std::size_t>(rows));
        cpu::gemm(rt, wr.data(), rows, cols, X.data(), nx, Y.data(), nullptr);
        cpu::gemm(rt, wr.data(), rows, cols, X.data(), nx, Yt.data(), &pool);
        std::vector<uint8_t> act(static_cast<std::size_t>(nx) * cpu::activation_row_bytes(rt, cols));
        cpu::quantize_activations(rt, X.data(), nx, cols, act.data());
        cpu::gemm_prepared(rt, wr.data(), rows, cols, act.data(), nx, Yp.data(), &pool);
        cpu::gemv(rt, wr.data(), rows, cols, X.data() + cols, y1.data(), &pool);
        const std::string l = label(rt, isa, rows, cols) + " nx " + std::to_string(nx);
        CHECK_MSG(std::memcmp(Y.data(), want.data(), Y.size() * 4) == 0, l + " gemm");
        CHECK_MSG(std::memcmp(Yt.data(), want.data(), Y.size() * 4) == 0, l + " gemm threaded");
        CHECK_MSG(std::memcmp(Yp.data(), want.data(), Y.size() * 4) == 0, l + " gemm_prepared");
        CHECK_MSG(std::memcmp(y1.data(), want.data() + rows, y1.size() * 4) == 0, l + " gemv");
        // Warm: no allocation.
        const long before = g_allocations.load();
        cpu::gemv(rt, wr.data(), rows, cols, X.data(), y1.data(), &pool);
        cpu::gemm(rt, wr.data(), rows, cols, X.data(), nx, Y.data(), &pool);
        CHECK_MSG(g_allocations.load() == before, l + " allocates once warm");
      }
    }
}

// IQ4_XS_R16 at the edges of its arithmetic, against the plain scalar IQ4_XS kernel bitwise: the
// scale codes 0 (−32), 32 (zero: an all-zero scale block), 63 (+31); every nibble 0 (−127, the
// biased table's smallest byte) or 15 (113, its largest); d of 0, the largest fp16, a subnormal and
// negative; activations at ±127 everywhere and all zero; and calls whose nrows is not a multiple of
// 16 (the matrix's last group partly used), through dot_rows and the multi-activation form.
// The edge-value tests' check: w (rows x cols of plain type t) repacked, against the plain scalar kernel
// for the activations X[0 .. nx), on every path, one activation at a time and all together, over the
// first nrows rows for each nrows given (a call never writes past nrows).
static void check_repacked_edges(GGMLType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                                 const std::vector<float>& X, int nx, std::initializer_list<int64_t> nrows_list) {
  const std::size_t stride = strata::quant::row_bytes(t, cols);
  const cpu::DotKernel& ref = cpu::dot_kernel(t, Isa::Scalar);
  const std::size_t ab = cpu::activation_row_bytes(t, cols);
  std::vector<uint8_t> act(static_cast<std::size_t>(nx) * ab);
  for (int i = 0; i < nx; ++i) ref.quantize_act(X.data() + i * cols, act.data() + i * ab, cols);
  std::vector<float> want(static_cast<std::size_t>(nx * rows));
  for (int i = 0; i < nx; ++i) ref.dot_rows(cols, w.data(), stride, rows, act.data() + i * ab, want.data() + i * rows);
  const GGMLType rt = cpu::repacked_type(t);
  const auto wr = repacked(t, w, rows, cols);
  for (Isa isa : runnable_isas()) {
    const cpu::DotKernel& k = cpu::dot_kernel(rt, isa);
    for (int64_t nrows : nrows_list) {
      const std::string l = label(rt, isa, nrows, cols);
      std::vector<float> got(static_cast<std::size_t>(nx * rows), -1.0f);
      for (int i = 0; i < nx; ++i)
        k.dot_rows(cols, wr.data(), stride, nrows, act.data() + i * ab, got.data() + i * rows);
      for (int i = 0; i < nx; ++i) {
        CHECK_MSG(std::memcmp(got.data() + i * rows, want.data() + i * rows, nrows * 4) == 0,
                  l + " activation " + std::to_string(i));
        if (nrows < rows) CHECK_MSG(got[i * rows + nrows] == -1.0f, l + " writes past nrows");
      }
      std::vector<const void*> acts(static_cast<std::size_t>(nx));
      std::vector<float*> outs(static_cast<std::size_t>(nx));
      std::vector<float> multi(got.size(), -1.0f);
      for (int a = 0; a < nx; ++a) {
        acts[a] = act.data() + a * ab;
        outs[a] = multi.data() + a * rows;
      }
      cpu::dot_rows_acts(k, cols, wr.data(), stride, nrows, acts.data(), nx, outs.data());
      for (int a = 0; a < nx; ++a)
        CHECK_MSG(std::memcmp(multi.data() + a * rows, want.data() + a * rows, nrows * 4) == 0,
                  l + " multi #" + std::to_string(a));
    }
  }
}

TEST(repacked_iq4_xs_edge_values_equal_the_plain_scalar_kernel_bitwise) {
  using strata::quant::BlockIQ4_XS;
  std::mt19937 rng(24);
  const int64_t rows = 48, cols = 768;
  const int64_t nb = cols / 256;
  const std::size_t stride = strata::quant::row_bytes(GGMLType::IQ4_XS, cols);
  const uint16_t ds[] = {0x0000, 0x7BFF, 0x0001, 0xBC00, 0x2E66};  // 0, 65504, 2^-24, -1, ~0.1
  auto w = random_rows(GGMLType::IQ4_XS, rows, cols, rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      auto* x = reinterpret_cast<BlockIQ4_XS*>(w.data() + static_cast<std::size_t>(r) * stride) + b;
      const int kind = static_cast<int>((r + b) % 6);
      if (kind < 3) {  // one scale code for the whole block
        const unsigned code = kind == 0 ? 0u : kind == 1 ? 32u : 63u;
        x->scales_h = static_cast<uint16_t>(kind == 0 ? 0 : kind == 1 ? 0xAAAA : 0xFFFF);
        for (auto& l : x->scales_l) l = static_cast<uint8_t>((code & 15) | ((code & 15) << 4));
      }
      if (kind == 3) std::memset(x->qs, 0x00, sizeof x->qs);
      if (kind == 4) std::memset(x->qs, 0xFF, sizeof x->qs);
      x->d = ds[(r * 7 + b) % 5];
    }
  // Activations: random, saturated (every byte ±127), all zero, one huge value.
  std::vector<float> X = random_floats(4 * cols, rng);
  for (int64_t i = 0; i < cols; ++i) X[cols + i] = (i % 3 == 0) ? -1.0f : 1.0f;
  for (int64_t i = 0; i < cols; ++i) X[2 * cols + i] = 0.0f;
  X[3 * cols + 5] = 1e30f;
  check_repacked_edges(GGMLType::IQ4_XS, w, rows, cols, X, 4, {48, 40, 7});
}

// Q4_0 / Q4_K extremes: the AVX-512 kernels sum the high nibbles as 16·q in a chain of their own
// and shift it back, so the largest sums (every nibble 15, every activation byte ±127, one sign or
// alternating) must still come out exact. Each row is a different pattern of quant bytes. Q5_0: the
// same fills cover its qh too (every fifth bit set, none, alternate groups of four), which the
// AVX-512 kernel adds as 16 through one mask per step. IQ4_NL: every nibble 0 (−127) or 15 (113), looked up
// as the codebook + 128 under vpdpbusd.
TEST(repacked_q4_extreme_nibbles_equal_the_plain_scalar_kernel_bitwise) {
  std::mt19937 rng(25);
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::IQ4_NL, GGMLType::Q4_K}) {
    // An odd block count (a lone last block) for the 32-column types.
    const int64_t rows = 48, cols = super_block(t) ? 512 : 544;
    const std::size_t stride = strata::quant::row_bytes(t, cols);
    const std::size_t bs = strata::quant::type_size(t);
    // After d (Q4_0, IQ4_NL; Q5_0: the fill covers qh too) / d, m (Q5_1, qh too) / d, dmin, scales (Q4_K).
    const std::size_t qs_off = t == GGMLType::Q4_K ? 16 : t == GGMLType::Q5_1 ? 4 : 2;
    auto w = random_rows(t, rows, cols, rng);
    const uint8_t fills[] = {0xFF, 0xF0, 0x0F, 0x00, 0x8F};
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 6 == 5) continue;  // keep some random rows
      for (std::size_t b = 0; b < stride / bs; ++b) {
        uint8_t* blk = w.data() + static_cast<std::size_t>(r) * stride + b * bs;
        std::memset(blk + qs_off, fills[r % 5], bs - qs_off);
      }
    }
    std::vector<float> X(static_cast<std::size_t>(4 * cols));
    for (int64_t i = 0; i < cols; ++i) {
      X[i] = 1.0f;                                         // every byte +127
      X[cols + i] = -1.0f;                                 // every byte -127
      X[2 * cols + i] = (i % 2 == 0) ? 1.0f : -1.0f;       // alternating
      X[3 * cols + i] = (i / 16 % 2 == 0) ? 1.0f : -1.0f;  // low-nibble columns one sign, high the other
    }
    check_repacked_edges(t, w, rows, cols, X, 4, {48, 40, 7});  // and calls ending inside a group
  }
}

TEST(in_place_repack_equals_the_copy_and_bad_shapes_are_refused) {
  std::mt19937 rng(23);
  for (GGMLType t : kPlain) {
    const bool k = super_block(t);
    const int64_t rows = 32, cols = k ? 512 : 128;
    auto w = random_rows(t, rows, cols, rng);
    const auto want = repacked(t, w, rows, cols);
    const auto plain = w;
    cpu::repack_rows_in_place(t, w.data(), rows, cols);
    CHECK(w == want);
    std::vector<uint8_t> back(w.size());
    cpu::unpack_rows(cpu::repacked_type(t), w.data(), rows, cols, back.data());
    CHECK(back == plain);                                        // unpack is the inverse
    for (int64_t odd_cols : {k ? int64_t{768} : int64_t{96}}) {  // an odd block count
      const auto p2 = random_rows(t, 16, odd_cols, rng);
      std::vector<uint8_t> r2(p2.size()), b2(p2.size());
      cpu::repack_rows(t, p2.data(), 16, odd_cols, r2.data());
      cpu::unpack_rows(cpu::repacked_type(t), r2.data(), 16, odd_cols, b2.data());
      CHECK(b2 == p2);
    }
    std::vector<uint8_t> out(w.size());
    CHECK_THROWS(cpu::repack_rows(t, w.data(), 24, cols, out.data()));  // not whole groups
  }
  std::vector<uint8_t> b(4096);
  CHECK_THROWS(cpu::repack_rows(GGMLType::IQ2_XS, b.data(), 16, 256, b.data()));  // no repacked form
  CHECK(!cpu::can_repack(GGMLType::Q8_0, 0));
  CHECK(!cpu::can_repack(GGMLType::Q8_0, 17));
  CHECK(cpu::can_repack(GGMLType::Q8_0, 2048));
}

TEST(repack_modes_decide_as_documented) {
  IsaGuard guard;
  using cpu::RepackMode;
  CHECK(!cpu::should_repack(RepackMode::Off, GGMLType::Q4_0, 64));
  CHECK(!cpu::should_repack(RepackMode::On, GGMLType::Q4_0, 40));  // not whole groups
  CHECK(!cpu::should_repack(RepackMode::On, GGMLType::IQ2_XS, 64));
  CHECK(cpu::repack_pays(GGMLType::Q5_K, Isa::Avx512) && !cpu::repack_pays(GGMLType::Q5_K, Isa::Avx2));
  CHECK(cpu::repack_pays(GGMLType::Q5_0, Isa::Avx512) && cpu::repack_pays(GGMLType::Q5_0, Isa::Avx2));
  CHECK(cpu::repack_pays(GGMLType::IQ4_NL, Isa::Avx512) && cpu::repack_pays(GGMLType::IQ4_NL, Isa::Avx2));
  CHECK(cpu::repack_pays(GGMLType::Q5_1, Isa::Avx512) && cpu::repack_pays(GGMLType::Q5_1, Isa::Avx2));
  CHECK(!cpu::can_repack(GGMLType::Q4_1, 64));
  CHECK(cpu::repack_pays(GGMLType::Q3_K, Isa::Avx512) && !cpu::repack_pays(GGMLType::Q3_K, Isa::Avx2));
  CHECK(cpu::repack_pays(GGMLType::Q2_K, Isa::Avx512) && cpu::repack_pays(GGMLType::Q2_K, Isa::Avx2));
  for (Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    CHECK(cpu::should_repack(RepackMode::On, GGMLType::Q8_0, 64));
    CHECK(cpu::should_repack(RepackMode::Auto, GGMLType::Q4_0, 64) == cpu::repack_pays(GGMLType::Q4_0, isa));
  }
  CHECK(!cpu::repack_pays(GGMLType::Q4_0, Isa::Scalar));
  CHECK(cpu::repack_pays(GGMLType::Q4_0, Isa::Avx512) && cpu::repack_pays(GGMLType::Q8_0, Isa::Avx512));
}

// Q6_K extremes: the AVX-512 kernel builds each 6-bit quant from masked, shifted bytes (one of the four
// quants of a byte as 4·q, its sum shifted back), so every quant 0 or 63, the bit patterns that
// would leak a neighbour's bits (ql 0xF0 / 0x0F under qh 0xCC / 0x33), scales 127 and −128 and
// activations ±127 of one sign, alternating or one sign per quant position must all come out
// exact; 5 super-blocks (an odd count: the layout's lone last block), 7 activations (passes of 4 and
// 3), nrows not a multiple of 16.
TEST(repacked_q6_k_extreme_quants_and_scales_equal_the_plain_scalar_kernel_bitwise) {
  using strata::quant::BlockQ6_K;
  std::mt19937 rng(26);
  const int64_t rows = 48, cols = 1280;
  const int64_t nb = cols / 256;
  const std::size_t stride = strata::quant::row_bytes(GGMLType::Q6_K, cols);
  auto w = random_rows(GGMLType::Q6_K, rows, cols, rng);
  const uint8_t ql_fill[] = {0x00, 0xFF, 0xF0, 0x0F, 0xFF, 0x00};
  const uint8_t qh_fill[] = {0x00, 0xFF, 0xCC, 0x33, 0x00, 0xFF};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      auto* x = reinterpret_cast<BlockQ6_K*>(w.data() + static_cast<std::size_t>(r) * stride) + b;
      const int kind = static_cast<int>(r % 8);  // 6: random quants, 7: random ql under qh 0xFF
      if (kind < 6) std::memset(x->ql, ql_fill[kind], sizeof x->ql);
      if (kind < 6) std::memset(x->qh, qh_fill[kind], sizeof x->qh);
      if (kind == 7) std::memset(x->qh, 0xFF, sizeof x->qh);
      const int scales = static_cast<int>((r / 8 + b) % 4);  // 3: random
      for (int i = 0; i < 16; ++i) {
        if (scales == 0) x->scales[i] = 127;
        if (scales == 1) x->scales[i] = -128;
        if (scales == 2) x->scales[i] = static_cast<int8_t>(i % 2 == 0 ? 127 : -128);
      }
    }
  const int nx = 7;
  std::vector<float> X = random_floats(nx * cols, rng);
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t p = i % 128 / 32;                 // which of a qh byte's four quants column i is
    X[i] = 1.0f;                                    // every byte +127
    X[cols + i] = -1.0f;                            // every byte -127
    X[2 * cols + i] = (i % 2 == 0) ? 1.0f : -1.0f;  // alternating
    X[3 * cols + i] = p == 3 ? -1.0f : 1.0f;        // the 4·q quants one sign, the others the other
    X[4 * cols + i] = p < 2 ? 1.0f : -1.0f;         // low-nibble quants (p 0, 1) against high (p 2, 3)
    X[5 * cols + i] = 0.0f;                         // all zero
  }
  check_repacked_edges(GGMLType::Q6_K, w, rows, cols, X, nx, {48, 40, 7});
}
