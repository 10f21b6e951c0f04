// Dot kernels and GEMV/GEMM: every format x every ISA this machine runs against the scalar
// reference, the scalar reference against a float64 dot of the decoded operands, activation
// quantization identical on every ISA, gemm row i == gemv bitwise, threaded == single-threaded,
// and no heap allocation once warm.
//
// Tolerances: the integer part of every block dot is exact, so kernels differ only in the order
// of f32 accumulation: |kernel − reference| ≤ 2e-5 · Σ|w_j·a_j| (+1e-30), with a_j the decoded
// activation the kernel multiplies (f32 x for float weights, the q8 form otherwise).
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "strata/cpu/features.h"
#include "strata/cpu/gemv.h"
#include "strata/cpu/kernels.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"
#include "test_quant_util.h"

// Counts heap allocations made by this process (checked around warm gemv calls). GCC cannot see
// that these replacements pair malloc with free and warns at every inlined delete.
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

std::vector<int64_t> test_widths(GGMLType type) {
  const int64_t bs = strata::quant::block_size(type);
  if (bs == 256) return {256, 512, 1024, 2048};
  if (bs == 32) return {32, 64, 96, 160, 352, 800, 1024, 2048};  // 352, 800: 8-block passes then a tail
  return {1, 7, 8, 33, 64, 1000, 2048};
}

std::string label(GGMLType type, Isa isa, int64_t n) {
  return std::string(strata::quant::type_name(type)) + " / " + cpu::isa_name(isa) + " / n=" + std::to_string(n);
}

}  // namespace

TEST(the_best_isa_is_tested) {
  std::string names;
  for (Isa isa : runnable_isas()) names += std::string(" ") + cpu::isa_name(isa);
  std::printf("kernels under test:%s\n", names.c_str());
  const auto isas = runnable_isas();
  CHECK(std::find(isas.begin(), isas.end(), cpu::best_isa()) != isas.end());
#if defined(__aarch64__)
  CHECK(cpu::isa_is_neon(cpu::best_isa()));
#endif
#if defined(__x86_64__) && defined(__AVX2__)
  CHECK(cpu::best_isa() == Isa::Avx2 || cpu::best_isa() == Isa::Avx512);
#endif
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__AVX512VNNI__)
  CHECK(cpu::best_isa() == Isa::Avx512);  // a -march=native build on an AVX-512 VNNI machine
#endif
  // AVX-512 implies AVX2 (its kernels use AVX2 helpers too).
  if (cpu::isa_supported(Isa::Avx512)) CHECK(cpu::isa_supported(Isa::Avx2));
}

TEST(activation_quantization_is_identical_on_every_isa) {
  IsaGuard guard;
  std::mt19937 rng(11);
  for (GGMLType type : {GGMLType::Q4_0, GGMLType::Q4_K}) {
    const int64_t n = 2048;
    auto x = random_floats(n, rng, 3.0f);
    x[5] = 0.0f;
    for (int j = 0; j < 32; ++j) x[static_cast<std::size_t>(64 + j)] = 0.0f;  // an all-zero block
    // Exact ties of the rounding rules.
    x[100] = 0.5f;
    x[101] = -2.5f;
    const std::size_t bytes = cpu::activation_row_bytes(type, n);
    std::vector<uint8_t> ref(bytes), got(bytes);
    cpu::dot_kernel(type, Isa::Scalar).quantize_act(x.data(), ref.data(), n);
    for (Isa isa : runnable_isas()) {
      cpu::dot_kernel(type, isa).quantize_act(x.data(), got.data(), n);
      CHECK_MSG(std::memcmp(ref.data(), got.data(), bytes) == 0, label(type, isa, n));
    }
  }
}

TEST(scalar_kernels_match_float64_dot_of_decoded_operands) {
  std::mt19937 rng(1);
  for (GGMLType type : all_types()) {
    for (int64_t n : test_widths(type)) {
      const auto w = random_rows(type, 1, n, rng);
      const auto x = random_floats(n, rng);
      const auto& k = cpu::dot_kernel(type, Isa::Scalar);
      std::vector<uint8_t> act(cpu::activation_row_bytes(type, n));
      if (k.quantize_act)
        k.quantize_act(x.data(), act.data(), n);
      else
        std::memcpy(act.data(), x.data(), act.size());
      float got = 0.0f;
      k.dot_rows(n, w.data(), 0, 1, act.data(), &got);
      const Ref ref = ref_dot(dequant(type, w.data(), n), decoded_activation(k.act_type, act.data(), n));
      CHECK_MSG(std::fabs(got - ref.dot) <= 2e-5 * ref.abs_sum + 1e-30,
                label(type, Isa::Scalar, n) + ": " + std::to_string(got) + " vs " + std::to_string(ref.dot));
    }
  }
}

TEST(every_isa_matches_the_scalar_reference) {
  std::mt19937 rng(2);
  for (GGMLType type : all_types()) {
    for (int64_t n : test_widths(type)) {
      const int64_t rows = 5;
      const auto w = random_rows(type, rows, n, rng);
      const std::size_t stride = strata::quant::row_bytes(type, n);
      const auto x = random_floats(n, rng);
      const auto& ks = cpu::dot_kernel(type, Isa::Scalar);
      std::vector<uint8_t> act(cpu::activation_row_bytes(type, n));
      if (ks.quantize_act)
        ks.quantize_act(x.data(), act.data(), n);
      else
        std::memcpy(act.data(), x.data(), act.size());
      std::vector<float> ref(rows);
      ks.dot_rows(n, w.data(), stride, rows, act.data(), ref.data());
      const auto a = decoded_activation(ks.act_type, act.data(), n);
      for (Isa isa : runnable_isas()) {
        std::vector<float> got(rows);
        cpu::dot_kernel(type, isa).dot_rows(n, w.data(), stride, rows, act.data(), got.data());
        for (int64_t r = 0; r < rows; ++r) {
          const Ref rr = ref_dot(dequant(type, w.data() + r * static_cast<int64_t>(stride), n), a);
          CHECK_MSG(std::fabs(got[static_cast<std::size_t>(r)] - ref[static_cast<std::size_t>(r)]) <=
                        2e-5 * rr.abs_sum + 1e-30,
                    label(type, isa, n) + " row " + std::to_string(r) + ": " +
                        std::to_string(got[static_cast<std::size_t>(r)]) + " vs " +
                        std::to_string(ref[static_cast<std::size_t>(r)]));
        }
      }
    }
  }
}

// The IQ2 / IQ3 / IQ1 dots of every path add each super-block's integer sum exactly and then do the
// scalar reference's float operations (sum += (dx·dy)·isum, the format's constant at the end), so one
// activation and several give the scalar kernel's bits, on every width (one super-block to eight).
TEST(iq_dots_are_bitwise_the_scalar_kernels) {
  // Where the CPU has AVX512_VBMI the avx512 IQ2 / IQ3 kernels look their grids up with VBMI: both ways are run.
  const bool vbmi = cpu::cpu_has_avx512_vbmi();
  for (bool use_vbmi : {false, true}) {
    if (use_vbmi && !vbmi) {
      std::printf("AVX512_VBMI not here: the IQ3_S vpermi2b kernels not run\n");
      continue;
    }
    if (vbmi) cpu::force_avx512_vbmi(use_vbmi);
    std::mt19937 rng(21);
    const GGMLType kIq[] = {GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
                            GGMLType::IQ3_S,   GGMLType::IQ1_S,  GGMLType::IQ1_M};
    for (GGMLType type : kIq) {
      for (int64_t n : test_widths(type)) {
        const int64_t rows = 19;  // a 16-row group and a remainder
        constexpr int kActs = 11;
        const auto w = random_rows(type, rows, n, rng);
        const std::size_t stride = strata::quant::row_bytes(type, n);
        const auto X = random_floats(kActs * n, rng);
        const auto& ks = cpu::dot_kernel(type, Isa::Scalar);
        const std::size_t ab = cpu::activation_row_bytes(type, n);
        std::vector<uint8_t> act(kActs * ab);
        for (int a = 0; a < kActs; ++a) ks.quantize_act(X.data() + a * n, act.data() + a * ab, n);
        std::vector<float> ref(kActs * rows);
        for (int a = 0; a < kActs; ++a) ks.dot_rows(n, w.data(), stride, rows, act.data() + a * ab, &ref[a * rows]);
        for (Isa isa : runnable_isas()) {
          const cpu::DotKernel& k = cpu::dot_kernel(type, isa);
          std::vector<float> got(kActs * rows, -1.0f);
          k.dot_rows(n, w.data(), stride, rows, act.data(), got.data());
          CHECK_MSG(std::memcmp(got.data(), ref.data(), rows * 4) == 0, label(type, isa, n) + " one activation");
          const void* acts[kActs];
          float* outs[kActs];
          for (int a = 0; a < kActs; ++a) {
            acts[a] = act.data() + a * ab;
            outs[a] = &got[a * rows];
          }
          cpu::dot_rows_acts(k, n, w.data(), stride, rows, acts, kActs, outs);
          CHECK_MSG(std::memcmp(got.data(), ref.data(), got.size() * 4) == 0,
                    label(type, isa, n) + " " + std::to_string(kActs) + " activations");
        }
      }
    }
  }
  if (vbmi) cpu::force_avx512_vbmi(true);
}

TEST(kernels_cover_extreme_bytes) {
  // Every weight byte at its extremes (Q8_0 -128, all nibbles 15 ...) with activations at ±127.
  std::mt19937 rng(3);
  for (GGMLType type : all_types()) {
    if (strata::quant::block_size(type) == 1) continue;
    const int64_t n = 512;
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}}) {
      auto w = random_rows(type, 1, n, rng);
      const auto scales = w;  // keep the random valid scales, overwrite everything else
      std::memset(w.data(), fill, w.size());
      const std::size_t bs = strata::quant::type_size(type);
      for (std::size_t off = 0; off < w.size(); off += bs) {
        switch (type) {
          case GGMLType::Q2_K: std::memcpy(&w[off + 80], &scales[off + 80], 4); break;
          case GGMLType::Q6_K: std::memcpy(&w[off + 208], &scales[off + 208], 2); break;
          case GGMLType::Q4_K:
          case GGMLType::Q5_K:
          case GGMLType::Q5_1: std::memcpy(&w[off], &scales[off], 4); break;
          case GGMLType::Q3_K: std::memcpy(&w[off + 108], &scales[off + 108], 2); break;
          case GGMLType::IQ1_M:  // d is the top nibbles of the scale words (bytes 48..55): keep only those
            for (std::size_t b = off + 49; b < off + 56; b += 2)
              w[b] = static_cast<uint8_t>((w[b] & 0x0F) | (scales[b] & 0xF0));
            break;
          default: std::memcpy(&w[off], &scales[off], 2); break;
        }
      }
      std::vector<float> x(static_cast<std::size_t>(n));
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = (j % 3 == 0) ? -1.0f : 1.0f;
      const auto& ks = cpu::dot_kernel(type, Isa::Scalar);
      std::vector<uint8_t> act(cpu::activation_row_bytes(type, n));
      ks.quantize_act(x.data(), act.data(), n);
      const Ref rr = ref_dot(dequant(type, w.data(), n), decoded_activation(ks.act_type, act.data(), n));
      for (Isa isa : runnable_isas()) {
        float got = 0.0f;
        cpu::dot_kernel(type, isa).dot_rows(n, w.data(), 0, 1, act.data(), &got);
        CHECK_MSG(std::fabs(got - rr.dot) <= 2e-5 * rr.abs_sum + 1e-30,
                  label(type, isa, n) + " fill " + std::to_string(fill) + ": " + std::to_string(got) + " vs " +
                      std::to_string(rr.dot));
      }
    }
  }
}

TEST(gemm_rows_equal_gemv_bitwise_and_threads_change_nothing) {
  IsaGuard guard;
  std::mt19937 rng(4);
  strata::ThreadPool pool(3);
  for (Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    for (GGMLType type : all_types()) {
      const int64_t cols = strata::quant::block_size(type) == 256 ? 512 : 256;
      const int64_t rows = 700;  // enough weight bytes to take the threaded path for every type
      const auto w = random_rows(type, rows, cols, rng);
      const int64_t nx = 3;
      const auto X = random_floats(nx * cols, rng);
      std::vector<float> Y(static_cast<std::size_t>(nx * rows)), Yt(Y.size());
      cpu::gemm(type, w.data(), rows, cols, X.data(), nx, Y.data(), nullptr);
      cpu::gemm(type, w.data(), rows, cols, X.data(), nx, Yt.data(), &pool);
      CHECK_MSG(std::memcmp(Y.data(), Yt.data(), Y.size() * 4) == 0, label(type, isa, cols) + " gemm threaded");
      for (int64_t i = 0; i < nx; ++i) {
        std::vector<float> y(static_cast<std::size_t>(rows)), yt(y.size());
        cpu::gemv(type, w.data(), rows, cols, X.data() + i * cols, y.data(), nullptr);
        cpu::gemv(type, w.data(), rows, cols, X.data() + i * cols, yt.data(), &pool);
        CHECK_MSG(std::memcmp(y.data(), Y.data() + i * rows, y.size() * 4) == 0, label(type, isa, cols) + " gemm row");
        CHECK_MSG(std::memcmp(y.data(), yt.data(), y.size() * 4) == 0, label(type, isa, cols) + " gemv threaded");
        const std::size_t stride = strata::quant::row_bytes(type, cols);
        for (int64_t r : {int64_t{0}, int64_t{1}, rows - 1}) {
          const float d = cpu::dot(type, w.data() + r * static_cast<int64_t>(stride), X.data() + i * cols, cols);
          CHECK_MSG(std::memcmp(&d, &y[static_cast<std::size_t>(r)], 4) == 0,
                    label(type, isa, cols) + " dot == gemv row");
        }
      }
      // Prepared activations give the same bits.
      std::vector<uint8_t> act(static_cast<std::size_t>(nx) * cpu::activation_row_bytes(type, cols));
      cpu::quantize_activations(type, X.data(), nx, cols, act.data());
      std::vector<float> Yp(Y.size());
      cpu::gemm_prepared(type, w.data(), rows, cols, act.data(), nx, Yp.data(), &pool);
      CHECK_MSG(std::memcmp(Y.data(), Yp.data(), Y.size() * 4) == 0, label(type, isa, cols) + " gemm_prepared");
    }
  }
}

// The multi-activation kernels (verification windows, prefill chunks): every activation count
// 1..9 (the kernels group 2-4 activations and 1-4 weight rows), rows that leave group remainders,
// and a block count with a tail after the groups of eight — each (row, activation) is bitwise
// the single-activation dot.
TEST(multi_activation_dots_equal_single_bitwise) {
  IsaGuard guard;
  std::mt19937 rng(14);
  for (Isa isa : runnable_isas()) {
    cpu::force_isa(isa);
    for (GGMLType type : all_types()) {
      const int64_t bs = strata::quant::block_size(type);
      const int64_t cols = bs == 256 ? 512 : 11 * 32;
      const int64_t rows = 7;
      const auto w = random_rows(type, rows, cols, rng);
      const int64_t nx = 9;
      const auto X = random_floats(nx * cols, rng);
      const cpu::DotKernel& k = cpu::dot_kernel(type, isa);
      const std::size_t ab = cpu::activation_row_bytes(type, cols);
      std::vector<uint8_t> act(static_cast<std::size_t>(nx) * ab);
      cpu::quantize_activations(type, X.data(), nx, cols, act.data());
      std::vector<float> single(static_cast<std::size_t>(nx * rows));
      for (int64_t i = 0; i < nx; ++i)
        k.dot_rows(cols, w.data(), strata::quant::row_bytes(type, cols), rows, act.data() + i * ab,
                   single.data() + i * rows);
      for (int na = 1; na <= nx; ++na) {
        const void* acts[9];
        float* outs[9];
        std::vector<float> multi(static_cast<std::size_t>(na * rows), -1.0f);
        for (int a = 0; a < na; ++a) {
          acts[a] = act.data() + static_cast<std::size_t>(nx - 1 - a) * ab;  // any order
          outs[a] = multi.data() + a * rows;
        }
        cpu::dot_rows_acts(k, cols, w.data(), strata::quant::row_bytes(type, cols), rows, acts, na, outs);
        for (int a = 0; a < na; ++a)
          CHECK_MSG(std::memcmp(multi.data() + a * rows, single.data() + (nx - 1 - a) * rows, rows * 4) == 0,
                    label(type, isa, cols) + " " + std::to_string(na) + " activations, #" + std::to_string(a));
        std::vector<float> Y(static_cast<std::size_t>(na * rows));
        cpu::gemm(type, w.data(), rows, cols, X.data(), na, Y.data(), nullptr);
        for (int a = 0; a < na; ++a) {
          std::vector<float> y(static_cast<std::size_t>(rows));
          cpu::gemv(type, w.data(), rows, cols, X.data() + a * cols, y.data(), nullptr);
          CHECK_MSG(std::memcmp(y.data(), Y.data() + a * rows, rows * 4) == 0,
                    label(type, isa, cols) + " gemm of " + std::to_string(na) + " rows, row " + std::to_string(a));
        }
      }
    }
  }
}

TEST(warm_gemv_does_not_allocate) {
  std::mt19937 rng(5);
  strata::ThreadPool pool(2);
  for (GGMLType type : {GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::F16}) {
    const int64_t rows = 512, cols = 1024;
    const auto w = random_rows(type, rows, cols, rng);
    const auto x = random_floats(cols, rng);
    std::vector<float> y(rows);
    cpu::gemv(type, w.data(), rows, cols, x.data(), y.data(), &pool);  // warm-up grows the scratch
    const long before = g_allocations.load();
    for (int it = 0; it < 3; ++it) cpu::gemv(type, w.data(), rows, cols, x.data(), y.data(), &pool);
    CHECK_MSG(g_allocations.load() == before, std::string(strata::quant::type_name(type)) + " allocated " +
                                                  std::to_string(g_allocations.load() - before) + " times");
  }
}

TEST(bad_shapes_are_clear_errors) {
  std::vector<uint8_t> w(1024);
  std::vector<float> x(256), y(4);
  CHECK_THROWS(cpu::gemv(GGMLType::Q4_0, w.data(), 2, 33, x.data(), y.data(), nullptr));   // not a block multiple
  CHECK_THROWS(cpu::gemv(GGMLType::Q4_K, w.data(), 1, 128, x.data(), y.data(), nullptr));  // 256-block type
  CHECK_THROWS(cpu::gemv(GGMLType::Q4_1, w.data(), 1, 32, x.data(), y.data(), nullptr));   // no kernels
  CHECK_THROWS(cpu::gemv(GGMLType::Q8_0, nullptr, 1, 32, x.data(), y.data(), nullptr));
  CHECK_THROWS(cpu::gemv(GGMLType::Q8_0, w.data(), -1, 32, x.data(), y.data(), nullptr));
  try {
    cpu::gemv(GGMLType::Q4_0, w.data(), 2, 33, x.data(), y.data(), nullptr);
  } catch (const strata::Error& e) {
    CHECK(e.kind() == strata::ErrorKind::Value);
    CHECK(std::string(e.what()).find("Q4_0") != std::string::npos);
  }
  // Empty products are fine and write nothing / zeros.
  cpu::gemv(GGMLType::Q8_0, w.data(), 0, 32, x.data(), y.data(), nullptr);
  y[0] = 5.0f;
  cpu::gemv(GGMLType::Q8_0, w.data(), 1, 0, x.data(), y.data(), nullptr);
  CHECK_EQ(y[0], 0.0f);
}
