// ISA dispatch and the CPU settings: the detected paths are consistent (AVX-512 implies AVX2, the
// best path is runnable), STRATA_ISA / STRATA_REPACK parse as documented with one diagnostic per
// bad value and the group falling back to auto, and the AVX-512 activation quantizers (when this
// CPU runs them) are bitwise the scalar ones on awkward inputs (halves, zeros, huge values), and the
// x86 float kernels follow their documented accumulation order bitwise on every tile shape.
// AArch64: the NEON paths are ordered (i8mm implies dotprod), each has its own kernels, and the
// detected best path is the one the runner expects (tests/cross/run-neon.sh sets
// STRATA_TEST_EXPECT_ISA per qemu CPU model).
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "strata/config/settings.h"
#include "strata/cpu/cpu_settings.h"
#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/prefetch.h"
#include "strata/quant/types.h"
#include "strata/util/fp16.h"
#include "test_quant_util.h"

namespace cpu = strata::cpu;
using cpu::Isa;

TEST(detected_paths_are_consistent) {
  std::string names;
  for (Isa isa : cpu::compiled_isas())
    names += std::string(" ") + cpu::isa_name(isa) + (cpu::isa_supported(isa) ? "+" : "-");
  std::printf("compiled paths (+ runnable here):%s; best %s, active %s\n", names.c_str(),
              cpu::isa_name(cpu::best_isa()), cpu::isa_name(cpu::active_isa()));
  CHECK(cpu::isa_supported(cpu::best_isa()));
  CHECK(cpu::isa_supported(cpu::active_isa()));
  if (cpu::isa_supported(Isa::Avx512)) CHECK(cpu::isa_supported(Isa::Avx2) && cpu::best_isa() == Isa::Avx512);
  CHECK(cpu::isa_has_avx2(Isa::Avx512) && cpu::isa_has_avx2(Isa::Avx2) && !cpu::isa_has_avx2(Isa::Scalar));
}

TEST(the_detected_best_path_is_the_expected_one) {
  // Set by a runner that knows the CPU (tests/cross/run-neon.sh: qemu -cpu max / cortex-a53).
  const char* expect = std::getenv("STRATA_TEST_EXPECT_ISA");
  if (expect == nullptr || *expect == '\0') {
    std::printf("STRATA_TEST_EXPECT_ISA not set: nothing to compare\n");
    return;
  }
  CHECK_MSG(std::string(cpu::isa_name(cpu::best_isa())) == expect,
            std::string("best ") + cpu::isa_name(cpu::best_isa()) + ", expected " + expect);
}

TEST(neon_paths_are_ordered_and_have_their_own_kernels) {
  for (Isa isa : cpu::all_isas()) {
    // Every name parses back to its path (STRATA_ISA, force_isa by name).
    int same = 0;
    for (Isa other : cpu::all_isas()) same += std::string(cpu::isa_name(other)) == cpu::isa_name(isa);
    CHECK(same == 1);
    CHECK(cpu::isa_is_neon(isa) == (isa == Isa::Neon || isa == Isa::NeonDotprod || isa == Isa::NeonI8mm));
  }
  if (!cpu::isa_supported(Isa::Neon)) {
    CHECK(!cpu::isa_supported(Isa::NeonDotprod) && !cpu::isa_supported(Isa::NeonI8mm));
    std::printf("not an AArch64 build: NEON paths absent\n");
    return;
  }
  if (cpu::isa_supported(Isa::NeonI8mm)) CHECK(cpu::isa_supported(Isa::NeonDotprod));
  const Isa best = cpu::isa_supported(Isa::NeonI8mm)      ? Isa::NeonI8mm
                   : cpu::isa_supported(Isa::NeonDotprod) ? Isa::NeonDotprod
                                                          : Isa::Neon;
  CHECK(cpu::best_isa() == best);
  using quant_test::GGMLType;
  const cpu::DotKernel& base = cpu::dot_kernel(GGMLType::Q8_0, Isa::Neon);
  if (cpu::isa_supported(Isa::NeonDotprod)) {
    // The SDOT build of cpu/neon/ is a different function from the baseline one.
    CHECK(cpu::dot_kernel(GGMLType::Q8_0, Isa::NeonDotprod).dot_rows != base.dot_rows);
    CHECK(cpu::dot_kernel(GGMLType::Q4_K, Isa::NeonDotprod).dot_rows !=
          cpu::dot_kernel(GGMLType::Q4_K, Isa::Neon).dot_rows);
  }
  if (cpu::isa_supported(Isa::NeonI8mm)) {
    // SMMLA kernels with a multi-activation form for Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K; the rest is
    // dotprod's.
    for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q5_0, GGMLType::Q8_0, GGMLType::Q4_K, GGMLType::Q6_K}) {
      const cpu::DotKernel& k = cpu::dot_kernel(t, Isa::NeonI8mm);
      CHECK(k.dot_rows_multi != nullptr && k.dot_rows != cpu::dot_kernel(t, Isa::NeonDotprod).dot_rows);
    }
    CHECK(cpu::dot_kernel(GGMLType::Q5_K, Isa::NeonI8mm).dot_rows ==
          cpu::dot_kernel(GGMLType::Q5_K, Isa::NeonDotprod).dot_rows);
  }
}

TEST(cpu_settings_parse_as_documented) {
  struct CpuParse {
    cpu::CpuSettings settings;
    std::vector<std::string> diagnostics;
  };
  // The cpu group of the one settings parser (config/settings.h).
  auto parse = [](const strata::config::EnvMap& env) {
    const strata::config::ParseResult p = strata::config::parse_settings(env);
    return CpuParse{p.settings.cpu, p.diagnostics};
  };
  auto r = parse({});
  CHECK(!r.settings.isa && r.settings.repack == cpu::RepackMode::Auto && r.diagnostics.empty());
  r = parse({{"STRATA_ISA", " Scalar "}, {"STRATA_REPACK", "OFF"}});
  CHECK(r.diagnostics.empty() && r.settings.isa == Isa::Scalar && r.settings.repack == cpu::RepackMode::Off);
  r = parse({{"STRATA_ISA", "auto"}, {"STRATA_REPACK", "1"}});
  CHECK(r.diagnostics.empty() && !r.settings.isa && r.settings.repack == cpu::RepackMode::On);
  for (Isa isa : cpu::compiled_isas()) {
    r = parse({{"STRATA_ISA", cpu::isa_name(isa)}});
    if (cpu::isa_supported(isa)) {
      CHECK(r.diagnostics.empty() && r.settings.isa == isa);
    } else {
      CHECK(r.diagnostics.size() == 1 && !r.settings.isa);
      CHECK(r.diagnostics[0].find("not available") != std::string::npos);
    }
  }
  // A bad value: one diagnostic naming the variable; the whole group falls back to auto.
  r = parse({{"STRATA_ISA", "sse9"}, {"STRATA_REPACK", "off"}});
  CHECK(r.diagnostics.size() == 1 && r.diagnostics[0].find("STRATA_ISA") != std::string::npos);
  CHECK(!r.settings.isa && r.settings.repack == cpu::RepackMode::Auto);
  r = parse({{"STRATA_REPACK", std::string(100, 'x')}});
  CHECK(r.diagnostics.size() == 1 && r.diagnostics[0].find("STRATA_REPACK") != std::string::npos);
  CHECK(r.diagnostics[0].size() < 120);  // long values are cut in the message
  // STRATA_PREFETCH: auto (nullopt), off (0) or a byte count; anything else rejects the group.
  r = parse({{"STRATA_PREFETCH", "auto"}});
  CHECK(r.diagnostics.empty() && !r.settings.prefetch);
  r = parse({{"STRATA_PREFETCH", "OFF"}});
  CHECK(r.diagnostics.empty() && r.settings.prefetch == std::size_t{0});
  r = parse({{"STRATA_PREFETCH", "4096"}, {"STRATA_REPACK", "off"}});
  CHECK(r.diagnostics.empty() && r.settings.prefetch == std::size_t{4096} && r.settings.repack == cpu::RepackMode::Off);
  for (const char* bad : {"-1", "65537", "1k", "on", ""}) {
    r = parse({{"STRATA_PREFETCH", bad}, {"STRATA_REPACK", "off"}});
    CHECK_MSG(r.diagnostics.size() == 1 && r.diagnostics[0].find("STRATA_PREFETCH") != std::string::npos, bad);
    CHECK(!r.settings.prefetch && r.settings.repack == cpu::RepackMode::Auto);
  }
}

// The prefetch defaults: a distance per repacked Q8_0 / Q4_0 / K-quant type on CPUs where prefetch pays
// (Intel; x86 without AVX-512), elsewhere none; and a prefetch never changes a GEMV's result (the kernels
// are run with the process's choice, whatever it is, against the scalar reference by the repack tests).
TEST(prefetch_defaults_follow_the_cpu) {
  using strata::quant::GGMLType;
  CHECK(cpu::prefetch_pays(true, true, true) && cpu::prefetch_pays(true, true, false));  // Intel
  CHECK(cpu::prefetch_pays(true, false, false));                                         // AMD Zen 3
  CHECK(!cpu::prefetch_pays(true, false, true));                                         // AMD Zen 4
  CHECK(!cpu::prefetch_pays(false, false, false));                                       // AArch64
  using cpu::Isa;
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q8_0_R16, true, Isa::Avx2) == 1024);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_0_R16, true, Isa::Avx2) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q5_0_R16, true, Isa::Avx2) == 2048);
  // The K-quant kernels: the AVX-512 ones prefetch a super-block at a time (1024 ahead), the AVX2 ones a few
  // lines per step (2048 ahead).
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_K_R16, true, Isa::Avx512) == 1024);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q6_K_R16, true, Isa::Avx512) == 1024);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_K_R16, true, Isa::Avx2) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q6_K_R16, true, Isa::Avx2) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::IQ4_XS_R16, true, Isa::Avx2) == 0);
  for (const Isa path : {Isa::Avx2, Isa::Avx512})
    for (const GGMLType t : {GGMLType::Q4_K_R16, GGMLType::Q8_0_R16, GGMLType::Q4_0_R16, GGMLType::Q5_0_R16})
      CHECK(cpu::default_prefetch_bytes(t, false, path) == 0);
  const bool pays =
      cpu::prefetch_pays(cpu::isa_supported(cpu::Isa::Avx2), cpu::cpu_is_intel(), cpu::isa_supported(cpu::Isa::Avx512));
  const std::size_t want = cpu::process_cpu_settings().prefetch
                               ? *cpu::process_cpu_settings().prefetch
                               : cpu::default_prefetch_bytes(GGMLType::Q8_0_R16, pays, cpu::active_isa());
  CHECK(cpu::gemv_prefetch_bytes(GGMLType::Q8_0_R16) == want);
}

namespace {

using FloatType = quant_test::GGMLType;
constexpr FloatType kFloatTypes[] = {FloatType::F32, FloatType::F16, FloatType::BF16};

float decoded(FloatType type, const std::vector<uint8_t>& w, int64_t i) {
  if (type == FloatType::F32) {
    float f;
    std::memcpy(&f, w.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, w.data() + 2 * i, 2);
  return type == FloatType::F16 ? strata::fp16_to_fp32(h) : strata::bf16_to_fp32(h);
}

// The order the AVX2 and AVX-512 float kernels promise for one (row, activation), in plain C++:
// four 8-lane chains of fused multiply-adds over each 32-element step (lane l of chain j takes
// element 32t + 8j + l), chain 0 alone over the 8-element steps, a scalar tail of fused
// multiply-adds, then (a0 + a1) + (a2 + a3) per lane and the reduction of the 8 lanes as
// (l + l+4), then (0 + 2, 1 + 3), then their sum; the tail is added last.
float documented_float_dot(FloatType type, const std::vector<uint8_t>& w, int64_t row, int64_t n, const float* x) {
  float acc[4][8] = {};
  int64_t i = 0;
  auto wv = [&](int64_t j) { return decoded(type, w, row * n + j); };
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 8; ++l) acc[j][l] = std::fma(wv(i + 8 * j + l), x[i + 8 * j + l], acc[j][l]);
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[0][l] = std::fma(wv(i + l), x[i + l], acc[0][l]);
  float tail = 0.0f;
  for (; i < n; ++i) tail = std::fma(wv(i), x[i], tail);
  float v[8], r[4];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  for (int l = 0; l < 4; ++l) r[l] = v[l] + v[l + 4];
  return ((r[0] + r[2]) + (r[1] + r[3])) + tail;
}

const int64_t kFloatWidths[] = {1, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 63, 64, 100, 257, 384, 1000};

}  // namespace

// The x86 float kernels (rows interleaved 3 or 4 per pass, several activations per pass) give
// every (row, activation) exactly the documented order above, whatever the row count, the
// interleave remainder and the length's tail: AVX2 and AVX-512 are bitwise the same for every n,
// so switching between the two paths does not move an F32/F16/BF16 model's logits.
TEST(x86_float_dots_follow_the_documented_order_bitwise) {
  std::mt19937 rng(9);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) {
      std::printf("%s not runnable here: skipped\n", cpu::isa_name(isa));
      continue;
    }
    for (auto type : kFloatTypes) {
      const cpu::DotKernel& k = cpu::dot_kernel(type, isa);
      for (int64_t n : kFloatWidths) {
        const int64_t rows = 9;  // two full groups of 4 (AVX-512) / three of 3 (AVX2) and remainders
        const auto w = quant_test::random_rows(type, rows, n, rng);
        const auto x = quant_test::random_floats(n, rng);
        const std::size_t stride = strata::quant::row_bytes(type, n);
        const std::string what =
            std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(type) + " n=" + std::to_string(n);
        float want[rows];
        for (int64_t r = 0; r < rows; ++r) want[r] = documented_float_dot(type, w, r, n, x.data());
        for (int64_t first = 0; first < rows; ++first)
          for (int64_t nr = 1; first + nr <= rows; ++nr) {
            float got[rows];
            k.dot_rows(n, w.data() + static_cast<std::size_t>(first) * stride, stride, nr, x.data(), got);
            CHECK_MSG(std::memcmp(got, want + first, static_cast<std::size_t>(nr) * 4) == 0,
                      what + " rows " + std::to_string(first) + "+" + std::to_string(nr));
          }
      }
    }
  }
}

// The multi-activation float kernels (verification windows, gemm): every activation count 1..16
// against row counts that leave every tile remainder: each (row, activation) bitwise the
// single-activation dot_rows.
TEST(x86_float_multi_activation_dots_equal_single_bitwise) {
  std::mt19937 rng(10);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) continue;
    for (auto type : kFloatTypes) {
      const cpu::DotKernel& k = cpu::dot_kernel(type, isa);
      CHECK(k.dot_rows_multi != nullptr);
      if (k.dot_rows_multi == nullptr) continue;
      for (int64_t n : {int64_t{7}, int64_t{33}, int64_t{100}, int64_t{384}}) {
        constexpr int64_t kRows = 13;
        constexpr int kActs = 16;
        const auto w = quant_test::random_rows(type, kRows, n, rng);
        const auto X = quant_test::random_floats(kActs * n, rng);
        const std::size_t stride = strata::quant::row_bytes(type, n);
        for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{7}, kRows}) {
          std::vector<float> single(static_cast<std::size_t>(kActs * rows));
          for (int a = 0; a < kActs; ++a) k.dot_rows(n, w.data(), stride, rows, X.data() + a * n, &single[a * rows]);
          for (int na = 1; na <= kActs; ++na) {
            const void* acts[kActs];
            float* outs[kActs];
            std::vector<float> multi(static_cast<std::size_t>(na * rows), -1.0f);
            for (int a = 0; a < na; ++a) {
              acts[a] = X.data() + (kActs - 1 - a) * n;  // any order
              outs[a] = multi.data() + a * rows;
            }
            k.dot_rows_multi(n, w.data(), stride, rows, acts, na, outs);
            for (int a = 0; a < na; ++a)
              CHECK_MSG(std::memcmp(outs[a], &single[(kActs - 1 - a) * rows], static_cast<std::size_t>(rows) * 4) == 0,
                        std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(type) +
                            " n=" + std::to_string(n) + " rows=" + std::to_string(rows) + " " + std::to_string(na) +
                            " activations, #" + std::to_string(a));
          }
        }
      }
    }
  }
}

// Q5_1 and IQ4_NL have kernels of their own (with a multi-activation form) on both x86 paths, so a
// missing table entry — dot_kernel's silent fallback to the scalar reference, or AVX-512's to AVX2 —
// fails here.
TEST(x86_q5_1_and_iq4_nl_are_not_the_scalar_kernels) {
  using quant_test::GGMLType;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) {
      std::printf("%s not runnable here: skipped\n", cpu::isa_name(isa));
      continue;
    }
    for (GGMLType t : {GGMLType::Q5_1, GGMLType::IQ4_NL}) {
      const std::string what = std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(t);
      const cpu::DotKernel& k = cpu::dot_kernel(t, isa);
      CHECK_MSG(k.dot_rows != cpu::dot_kernel(t, Isa::Scalar).dot_rows, what + " runs the scalar kernel");
      CHECK_MSG(k.dot_rows_multi != nullptr, what + " has no multi-activation kernel");
      if (isa == Isa::Avx512)
        CHECK_MSG(k.dot_rows != cpu::dot_kernel(t, Isa::Avx2).dot_rows, what + " runs the AVX2 kernel");
    }
  }
}

// The IQ1 / IQ2 / IQ3 formats have several-activation kernels on both x86 paths (AVX-512's its own:
// decoded blocks in the repacked register layout, one vpdpbusd per step), whose calls take
// kMaxActGroup activations: for_each_act_call hands them 16 at a time, and other kernels act_group().
TEST(x86_iq_kernels_take_wide_activation_calls) {
  using quant_test::GGMLType;
  const GGMLType kIq[] = {GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
                          GGMLType::IQ3_S,   GGMLType::IQ1_S,  GGMLType::IQ1_M};
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) {
      std::printf("%s not runnable here: skipped\n", cpu::isa_name(isa));
      continue;
    }
    for (GGMLType t : kIq) {
      const std::string what = std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(t);
      const cpu::DotKernel& k = cpu::dot_kernel(t, isa);
      CHECK_MSG(k.dot_rows_multi != nullptr, what + " has no multi-activation kernel");
      CHECK_MSG(k.max_acts == cpu::kMaxActGroup, what + " takes " + std::to_string(k.max_acts) + " activations");
      if (isa == Isa::Avx512)
        CHECK_MSG(k.dot_rows_multi != cpu::dot_kernel(t, Isa::Avx2).dot_rows_multi, what + " runs the AVX2 kernel");
      std::vector<int> calls;
      cpu::for_each_act_call(k, 110, 40, 37, [&](int64_t, int64_t, int64_t, int na) { calls.push_back(na); });
      CHECK_MSG((calls == std::vector<int>{16, 16, 5}), what + ": calls of the wrong sizes");
    }
  }
  const cpu::DotKernel& q8 = cpu::dot_kernel(GGMLType::Q8_0, Isa::Scalar);
  std::vector<int> calls;
  cpu::for_each_act_call(q8, 34, 40, 37, [&](int64_t, int64_t, int64_t, int na) { calls.push_back(na); });
  CHECK(!calls.empty() && calls.front() == static_cast<int>(cpu::act_group()));
}

TEST(activation_quantizers_are_bitwise_scalar_on_awkward_inputs) {
  using quant_test::GGMLType;
  const cpu::DotKernel& s0 = cpu::dot_kernel(GGMLType::Q8_0, Isa::Scalar);
  const cpu::DotKernel& sk = cpu::dot_kernel(GGMLType::Q4_K, Isa::Scalar);
  std::vector<float> x(512);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      switch (trial) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = static_cast<float>(static_cast<int>(i % 255) - 127) * 0.5f; break;  // exact halves
        case 2: x[i] = (i % 7 == 0) ? 1e30f : -1e-30f; break;
        case 3: x[i] = (i % 32 == 0) ? 127.0f : 0.5f; break;
        default: x[i] = std::normal_distribution<float>(0.0f, trial == 4 ? 1.0f : 1e4f)(rng); break;
      }
    }
    std::vector<uint8_t> want0(strata::quant::row_bytes(GGMLType::Q8_0, 512)),
        want_k(strata::quant::row_bytes(GGMLType::Q8_K, 512));
    s0.quantize_act(x.data(), want0.data(), 512);
    sk.quantize_act(x.data(), want_k.data(), 512);
    for (Isa isa : cpu::compiled_isas()) {
      if (!cpu::isa_supported(isa)) continue;
      std::vector<uint8_t> got0(want0.size()), got_k(want_k.size());
      cpu::dot_kernel(GGMLType::Q8_0, isa).quantize_act(x.data(), got0.data(), 512);
      cpu::dot_kernel(GGMLType::Q4_K, isa).quantize_act(x.data(), got_k.data(), 512);
      CHECK_MSG(got0 == want0, std::string(cpu::isa_name(isa)) + " q8_0 trial " + std::to_string(trial));
      CHECK_MSG(got_k == want_k, std::string(cpu::isa_name(isa)) + " q8_K trial " + std::to_string(trial));
    }
  }
}

#if defined(__aarch64__)
// AArch64 only: Q5_1, IQ4_NL and the IQ1/IQ2/IQ3 formats have NEON kernels of their own on every
// NEON path (neon-i8mm runs dotprod's), so a silent fallback to the scalar reference fails here.
TEST(neon_q5_1_iq4_nl_and_iq_kernels_are_not_the_scalar_kernels) {
  using quant_test::GGMLType;
  for (Isa isa : {Isa::Neon, Isa::NeonDotprod, Isa::NeonI8mm}) {
    if (!cpu::isa_supported(isa)) continue;
    for (GGMLType t : {GGMLType::Q5_1, GGMLType::IQ4_NL, GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S,
                       GGMLType::IQ3_XXS, GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M})
      CHECK_MSG(cpu::dot_kernel(t, isa).dot_rows != cpu::dot_kernel(t, Isa::Scalar).dot_rows,
                std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(t) + " runs the scalar kernel");
    // The IQ kernels decode each super-block once for a whole group of activations (dot_iq_neon.h).
    for (GGMLType t : {GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS, GGMLType::IQ3_S,
                       GGMLType::IQ1_S, GGMLType::IQ1_M}) {
      const cpu::DotKernel& k = cpu::dot_kernel(t, isa);
      const std::string name = std::string(cpu::isa_name(isa)) + " " + strata::quant::type_name(t);
      CHECK_MSG(k.dot_rows_multi != nullptr, name + " has no several-activation kernel");
      CHECK_MSG(k.max_acts == cpu::kMaxActGroup, name + " takes " + std::to_string(k.max_acts) + " activations a call");
    }
  }
}
#endif
