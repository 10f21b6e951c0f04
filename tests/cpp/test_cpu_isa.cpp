// ISA dispatch and the CPU settings: the detected paths are consistent (AVX-512 implies AVX2, the
// best path is runnable), STRATA_ISA / STRATA_REPACK parse as documented with one diagnostic per
// bad value and the group falling back to auto, and the AVX-512 activation quantizers (when this
// CPU runs them) are bitwise the scalar ones on awkward inputs (halves, zeros, huge values).
// AArch64: the NEON paths are ordered (i8mm implies dotprod), each has its own kernels, and the
// detected best path is the one the runner expects (tests/cross/run-neon.sh sets
// STRATA_TEST_EXPECT_ISA per qemu CPU model).
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "strata/config/settings.h"
#include "strata/cpu/cpu_settings.h"
#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/prefetch.h"
#include "strata/quant/types.h"
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

// The prefetch defaults: on Intel a distance per repacked Q8_0 / Q4_0 type, elsewhere none; and a
// prefetch never changes a GEMV's result (the kernels are run with the process's choice, whatever it
// is, against the scalar reference by the repack tests).
TEST(prefetch_defaults_follow_the_vendor) {
  using strata::quant::GGMLType;
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q8_0_R16, true) == 1024);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_0_R16, true) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_K_R16, true) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q6_K_R16, true) == 2048);
  CHECK(cpu::default_prefetch_bytes(GGMLType::IQ4_XS_R16, true) == 0);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_K_R16, false) == 0);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q8_0_R16, false) == 0);
  CHECK(cpu::default_prefetch_bytes(GGMLType::Q4_0_R16, false) == 0);
  const std::size_t want = cpu::process_cpu_settings().prefetch
                               ? *cpu::process_cpu_settings().prefetch
                               : cpu::default_prefetch_bytes(GGMLType::Q8_0_R16, cpu::cpu_is_intel());
  CHECK(cpu::gemv_prefetch_bytes(GGMLType::Q8_0_R16) == want);
}

// The AVX-512 float kernels keep the AVX2 kernels' accumulation order: bitwise the same results
// for rows of a multiple of 8 elements (every model width), so switching between the two paths
// does not move an F32/F16/BF16 model's logits. (A shorter tail is a scalar loop whose FMA
// contraction is the compiler's choice per translation unit.)
TEST(avx512_float_dots_are_bitwise_the_avx2_ones) {
  if (!cpu::isa_supported(Isa::Avx512)) {
    std::printf("avx512 not runnable here: skipped\n");
    return;
  }
  std::mt19937 rng(9);
  for (auto type : {quant_test::GGMLType::F32, quant_test::GGMLType::F16, quant_test::GGMLType::BF16}) {
    for (int64_t n : {8, 16, 24, 64, 96, 1000, 4096}) {
      const auto w = quant_test::random_rows(type, 3, n, rng);
      const auto x = quant_test::random_floats(n, rng);
      float a[3], b[3];
      const std::size_t stride = strata::quant::row_bytes(type, n);
      cpu::dot_kernel(type, Isa::Avx2).dot_rows(n, w.data(), stride, 3, x.data(), a);
      cpu::dot_kernel(type, Isa::Avx512).dot_rows(n, w.data(), stride, 3, x.data(), b);
      CHECK_MSG(std::memcmp(a, b, sizeof a) == 0,
                std::string(strata::quant::type_name(type)) + " n=" + std::to_string(n));
    }
  }
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
