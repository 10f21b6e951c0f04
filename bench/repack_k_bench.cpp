// Single-thread GEMV of the 256-column super-block formats plain and repacked (Q4_K / Q4_K_R16,
// Q6_K / Q6_K_R16, IQ4_XS / IQ4_XS_R16) per kernel path, on the shapes a Qwen3-MoE decode step reads
// (docs/benchmarks.md, "Repacked Q4_K and Q6_K", "Repacked IQ4_XS"), and of Q8_0 / Q8_0_R16 and
// Q4_0 / Q4_0_R16, Q5_0 / Q5_0_R16, Q5_1 / Q5_1_R16 and IQ4_NL / IQ4_NL_R16 (32-column blocks, Q8_0 activations;
// "Several activations from memory", "Result, session 46"):
//
//   repack_k_bench [--rows 512] [--cols 1024] [--mib 96] [--reps 7] [--isas avx2,avx512]
//                  [--types Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ4_XS,Q8_0,Q4_0,Q5_0,IQ4_NL,Q5_1] [--acts 1]
//
// --acts n > 1 times the multi-activation form (a prefill / verification window of n rows through
// gemm_prepared, one thread) instead of the GEMV; GB are then weight bytes per CPU-second per pass.
//
// "stream": one pass over --mib MiB of distinct matrices of rows x cols (an expert's gate or up
// projection by default; the MiB must be several times the last-level cache for every pass to read
// memory); "cached": the first matrix alone, 200 times (its compute speed while it fits L2). Each figure is GB of
// weights per CPU-second of this thread (CLOCK_THREAD_CPUTIME_ID: time waiting for a core on a shared host is not
// counted); the configurations take turns within every repetition and medians are reported. Under `valgrind
// --tool=callgrind --toggle-collect='strata::cpu::gemv*'` with --reps 1 the instruction counts per configuration are
// deterministic.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/gemv.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/quant/types.h"
#include "strata/util/aligned.h"
#include "strata/util/fp16.h"

using namespace strata;
using quant::GGMLType;

namespace {

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Random bytes with sane fp16 super-block scales at the format's offsets: valid blocks.
void fill(GGMLType t, uint8_t* p, std::size_t bytes, std::mt19937& rng) {
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> d(1e-3f, 2e-2f);
  const std::size_t bs = quant::type_size(t);
  const std::vector<std::size_t> offs = t == GGMLType::Q4_K || t == GGMLType::Q5_K ? std::vector<std::size_t>{0, 2}
                                        : t == GGMLType::Q6_K                      ? std::vector<std::size_t>{208}
                                        : t == GGMLType::Q3_K                      ? std::vector<std::size_t>{108}
                                        : t == GGMLType::Q2_K                      ? std::vector<std::size_t>{80, 82}
                                                                                   : std::vector<std::size_t>{0};
  for (std::size_t b = 0; b < bytes; b += bs)
    for (std::size_t o : offs) {
      const uint16_t h = fp32_to_fp16(d(rng));
      std::memcpy(p + b + o, &h, 2);
    }
}

struct Config {
  GGMLType type;  // the kernel's type (plain or repacked)
  cpu::Isa isa;
  const uint8_t* w;
  const uint8_t* xq;  // the activations in the type's form (gemm_prepared)
  std::vector<double> stream, cached;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 512, cols = 1024, mib = 96;
  int reps = 7, acts = 1;
  std::string isas_arg, types_arg = "Q4_K,Q6_K";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--rows")
      rows = std::atoll(v.c_str());
    else if (a == "--cols")
      cols = std::atoll(v.c_str());
    else if (a == "--mib")
      mib = std::atoll(v.c_str());
    else if (a == "--reps")
      reps = std::atoi(v.c_str());
    else if (a == "--isas")
      isas_arg = v;
    else if (a == "--types")
      types_arg = v;
    else if (a == "--acts")
      acts = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : cpu::compiled_isas())
    if (isa != cpu::Isa::Scalar && cpu::isa_supported(isa) &&
        (isas_arg.empty() || isas_arg.find(cpu::isa_name(isa)) != std::string::npos))
      isas.push_back(isa);
  std::vector<GGMLType> types;
  // Appends, not operator+: GCC 12 reports a false -Wrestrict on `"," + s + ","` here.
  std::string wanted = ",";
  wanted.append(types_arg).append(",");
  for (GGMLType t : {GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::IQ4_XS,
                     GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q5_0, GGMLType::IQ4_NL, GGMLType::Q5_1}) {
    std::string name = ",";
    name.append(quant::type_name(t)).append(",");
    if (wanted.find(name) != std::string::npos) types.push_back(t);
  }
  int64_t block_cols = 32;
  for (GGMLType t : types) block_cols = std::max<int64_t>(block_cols, quant::block_size(t));
  if (rows % cpu::kRepackRows != 0 || cols % block_cols != 0 || isas.empty() || types.empty() || acts < 1) {
    std::fprintf(
        stderr,
        "rows must be a multiple of 16, cols of the types' block (256 for the K-quants and IQ4_XS, 32 for "
        "Q8_0, Q4_0, Q5_0, Q5_1 and IQ4_NL), --types among Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ4_XS,Q8_0,Q4_0,Q5_0,IQ4_NL, "
        "--acts >= 1, "
        "and a SIMD "
        "path must run "
        "here\n");
    return 2;
  }

  std::mt19937 rng(1);
  std::vector<float> x(static_cast<std::size_t>(cols) * static_cast<std::size_t>(acts));
  std::normal_distribution<float> nd;
  for (float& v : x) v = nd(rng);
  std::vector<float> y(static_cast<std::size_t>(rows) * static_cast<std::size_t>(acts));
  auto run = [&](const Config& cf, const uint8_t* w) {
    if (acts == 1)
      cpu::gemv(cf.type, w, rows, cols, x.data(), y.data(), nullptr);
    else
      cpu::gemm_prepared(cf.type, w, rows, cols, cf.xq, acts, y.data(), nullptr);
  };

  std::vector<AlignedBuffer<uint8_t>> plain, packed;
  std::vector<std::vector<uint8_t>> xqs;  // per type: the window's activations, quantized once
  std::vector<Config> configs;
  std::vector<std::size_t> n_mats;
  std::string repack_lines;
  for (GGMLType t : types) {
    const std::size_t bytes = quant::row_bytes(t, cols) * static_cast<std::size_t>(rows);
    const std::size_t n = std::max<std::size_t>(1, static_cast<std::size_t>(mib << 20) / bytes);
    plain.emplace_back(bytes * n);
    packed.emplace_back(bytes * n);
    fill(t, plain.back().data(), bytes * n, rng);
    xqs.emplace_back(cpu::activation_row_bytes(t, cols) * static_cast<std::size_t>(acts));
    cpu::quantize_activations(t, x.data(), acts, cols, xqs.back().data());
    const double t0 = thread_cpu_s();
    for (std::size_t m = 0; m < n; ++m)
      cpu::repack_rows(t, plain.back().data() + m * bytes, rows, cols, packed.back().data() + m * bytes);
    const double dt = thread_cpu_s() - t0;
    repack_lines += std::string("repack ") + quant::type_name(t) + ": " + std::to_string((bytes * n) >> 20) +
                    " MiB in " + std::to_string(dt) + " CPU-s (" +
                    std::to_string(static_cast<double>(bytes * n) / dt / 1e9) +
                    " GB/s; the copy is the same size as the plain matrix)\n";
    for (cpu::Isa isa : isas) {
      configs.push_back(Config{t, isa, plain.back().data(), xqs.back().data(), {}, {}});
      configs.push_back(Config{cpu::repacked_type(t), isa, packed.back().data(), xqs.back().data(), {}, {}});
      n_mats.push_back(n);
      n_mats.push_back(n);
    }
  }

  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t c = 0; c < configs.size(); ++c) {
      Config& cf = configs[c];
      cpu::force_isa(cf.isa);
      const std::size_t bytes = quant::row_bytes(cf.type, cols) * static_cast<std::size_t>(rows);
      double t0 = thread_cpu_s();
      for (std::size_t m = 0; m < n_mats[c]; ++m) run(cf, cf.w + m * bytes);
      cf.stream.push_back(static_cast<double>(bytes * n_mats[c]) / (thread_cpu_s() - t0) / 1e9);
      constexpr int kCached = 200;
      t0 = thread_cpu_s();
      for (int k = 0; k < kCached; ++k) run(cf, cf.w);
      cf.cached.push_back(static_cast<double>(bytes) * kCached / (thread_cpu_s() - t0) / 1e9);
    }
  }
  std::printf(
      "%lld x %lld matrices, %lld MiB streamed per pass, %d activation(s), 1 thread, median of %d (GB of weights per "
      "CPU-second)\n",
      static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(mib), acts, reps);
  std::printf("%s", repack_lines.c_str());
  std::printf("| format | path | stream GB/CPU-s | cached GB/CPU-s |\n|---|---|---:|---:|\n");
  for (const Config& cf : configs)
    std::printf("| %s | %s | %.1f | %.1f |\n", quant::type_name(cf.type), cpu::isa_name(cf.isa), median(cf.stream),
                median(cf.cached));
  return 0;
}
