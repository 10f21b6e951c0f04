// AMX tile kernels vs the AVX-512 multi-activation kernels of the repacked Q8_0 / Q4_0 weights
// (docs/benchmarks.md, "AMX"): dot_rows_multi over one expert-sized matrix for several activation
// counts, in two call shapes:
//   whole   one call for the whole matrix and all activations (what a kernel can do at best);
//   engine  the calls engine::run_linear_tasks makes (row blocks of ~32 KiB of weights, activations
//           in groups of --act-group, default 8 as in multi_linear.cpp).
// Kernels are interleaved within each repetition; medians are reported as activations (tokens) per
// second through the matrix and integer GOP/s (2 · rows · cols · activations per second).
//
//   amx_bench [--reps N] [--threads T] [--act-group G]
//
// --threads T splits the rows over T std::threads (each its own share of whole groups, timed
// together); without AMX only the AVX-512 rows are printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/quant/types.h"

#if defined(STRATA_HAVE_AMX_TU)
#include "strata/cpu/amx/dot_amx.h"
#endif

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Matrix {
  quant::GGMLType plain;
  int64_t rows, cols;
  std::size_t stride;
  std::vector<uint8_t> w;    // repacked
  std::vector<uint8_t> act;  // max activations, contiguous
  std::size_t act_bytes;
};

Matrix make(quant::GGMLType plain, int64_t rows, int64_t cols, int max_acts, std::mt19937& rng) {
  Matrix m{plain, rows, cols, quant::row_bytes(plain, cols), {}, {}, 0};
  std::vector<uint8_t> raw(m.stride * static_cast<std::size_t>(rows));
  // Valid blocks: random quants, scale 0.01 (fp16 0x211f) at the start of each block.
  const std::size_t block = quant::row_bytes(plain, 32);
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(rng());
  for (std::size_t i = 0; i < raw.size(); i += block) {
    raw[i] = 0x1f;
    raw[i + 1] = 0x21;
  }
  m.w.resize(raw.size());
  cpu::repack_rows(plain, raw.data(), rows, cols, m.w.data());
  const cpu::DotKernel& k = cpu::dot_kernel(plain, cpu::Isa::Scalar);
  m.act_bytes = cpu::activation_row_bytes(plain, cols);
  m.act.resize(m.act_bytes * static_cast<std::size_t>(max_acts));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(cols));
  for (int a = 0; a < max_acts; ++a) {
    for (float& v : x) v = normal(rng);
    k.quantize_act(x.data(), m.act.data() + a * m.act_bytes, cols);
  }
  return m;
}

// One pass over rows [r0, r1) for nact activations, in the given call shape.
void pass(cpu::DotRowsMultiFn fn, const Matrix& m, int64_t r0, int64_t r1, int nact, bool engine, int act_group,
          std::vector<float>& out) {
  const void* acts[512];
  float* outs[512];
  for (int a = 0; a < nact; ++a) {
    acts[a] = m.act.data() + a * m.act_bytes;
    outs[a] = out.data() + static_cast<std::size_t>(a) * m.rows;
  }
  const uint8_t* w = m.w.data();
  if (!engine) {
    fn(m.cols, w + r0 * m.stride, m.stride, r1 - r0, acts, nact, outs);
    return;
  }
  // multi_linear.cpp: ~32 KiB of weights per row block, in whole 16-row groups.
  const int64_t rows_per_block = std::max<int64_t>(16, (32 * 1024 / static_cast<int64_t>(m.stride) + 15) / 16 * 16);
  for (int64_t r = r0; r < r1; r += rows_per_block) {
    const int64_t nr = std::min(rows_per_block, r1 - r);
    for (int a0 = 0; a0 < nact; a0 += act_group) {
      const int na = std::min(act_group, nact - a0);
      float* o[512];
      for (int a = 0; a < na; ++a) o[a] = outs[a0 + a] + r;
      fn(m.cols, w + r * m.stride, m.stride, nr, acts + a0, na, o);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7, threads = 1, act_group = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--reps")
      reps = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--threads")
      threads = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--act-group")
      act_group = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--threads T] [--act-group G]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || threads < 1 || act_group < 1 || act_group > 512) return 2;
  if (!cpu::isa_supported(cpu::Isa::Avx512)) {
    std::printf("amx_bench: needs the avx512 path (this CPU: %s)\n", cpu::isa_name(cpu::best_isa()));
    return 0;
  }
  std::printf("AMX: %s; threads %d; engine act group %d; reps %d (median)\n", cpu::amx_status().detail.c_str(), threads,
              act_group, reps);
  struct Kern {
    const char* name;
    cpu::DotRowsMultiFn q8, q4;
  };
  std::vector<Kern> kerns{{"avx512", cpu::avx512::kernel(quant::GGMLType::Q8_0_R16)->dot_rows_multi,
                           cpu::avx512::kernel(quant::GGMLType::Q4_0_R16)->dot_rows_multi}};
#if defined(STRATA_HAVE_AMX_TU)
  if (cpu::amx_status().usable)
    kerns.push_back({"amx", cpu::amx::dot_rows_multi_q8_0_r16_tiles, cpu::amx::dot_rows_multi_q4_0_r16_tiles});
#endif
  const int kActs[] = {1, 2, 4, 8, 16, 32, 64, 128};
  std::mt19937 rng(5);
  std::printf("%-6s %-10s %-6s %5s %-7s %12s %9s %8s\n", "type", "matrix", "shape", "acts", "kernel", "tok/s", "GOP/s",
              "vs avx512");
  for (quant::GGMLType plain : {quant::GGMLType::Q8_0, quant::GGMLType::Q4_0}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{512, 1024}, {1024, 512}}) {
      const int64_t all_rows = rows * threads;  // each thread its own rows x cols share
      const Matrix m = make(plain, all_rows, cols, 128, rng);
      std::vector<std::vector<float>> outs(static_cast<std::size_t>(threads),
                                           std::vector<float>(static_cast<std::size_t>(128 * all_rows)));
      for (bool engine : {false, true})
        for (int nact : kActs) {
          std::vector<std::vector<double>> secs(kerns.size());
          for (int rep = 0; rep < reps + 1; ++rep)
            for (std::size_t k = 0; k < kerns.size(); ++k) {
              const cpu::DotRowsMultiFn fn = plain == quant::GGMLType::Q8_0 ? kerns[k].q8 : kerns[k].q4;
              // Enough passes for ~ 5 ms of work.
              const int passes = std::max(1, static_cast<int>(20000000 / (rows * cols * nact)));
              const auto t0 = Clock::now();
              std::vector<std::thread> team;
              for (int t = 0; t < threads; ++t)
                team.emplace_back([&, t] {
                  for (int p = 0; p < passes; ++p)
                    pass(fn, m, t * rows, (t + 1) * rows, nact, engine, act_group, outs[static_cast<std::size_t>(t)]);
                });
              for (auto& th : team) th.join();
              const double s = std::chrono::duration<double>(Clock::now() - t0).count() / passes;
              if (rep > 0) secs[k].push_back(s);  // the first repetition warms up
            }
          const double base = median(secs[0]);
          for (std::size_t k = 0; k < kerns.size(); ++k) {
            const double s = median(secs[k]);
            std::printf("%-6s %4ldx%-5ld %-6s %5d %-7s %12.0f %9.1f %7.2fx\n", quant::type_name(plain),
                        static_cast<long>(rows), static_cast<long>(cols), engine ? "engine" : "whole", nact,
                        kerns[k].name, nact / s, 2.0 * static_cast<double>(all_rows * cols) * nact / s / 1e9, base / s);
          }
        }
    }
  }
  return 0;
}
