// Single-thread cost of the plain float kernels (F32 / F16 / BF16 weights, f32 activations) on the
// small matrices of a decode step: hyper-connection mappings [24 x 1536], routers / gates
// [16 x 384], at 1..4 activation rows (a decode step, 2- and 4-row verification windows) per
// kernel path (docs/benchmarks.md, "Float matrices at small row counts").
//
//   float_rows_bench [--reps N] [--isas avx2,avx512] [--l3]
//
// Each (shape, activations, path) runs cpu::dot_rows_acts — the call the engine's linear maps make —
// in batches of calls that take about a millisecond; the median batch gives ns per call. The
// weights stay in L1/L2: the figure is the kernel's compute speed. With --l3 each call takes the
// next of several copies of the matrix (4 MiB in all, beyond the L2, within the L3; in a shuffled
// order, so that no call continues the previous one's sequential stream), as in a forward pass
// where other work evicts a small matrix between its uses. Cases are interleaved per repetition so load from other
// processes falls on all alike. Measures only; it never fails on speed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/quant/types.h"
#include "strata/util/fp16.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
  quant::GGMLType type;
  cpu::Isa isa;
  int64_t rows, cols;
  int nact;
  std::vector<uint8_t> w;  // `copies` copies of the matrix, back to back
  std::vector<float> x;
  std::vector<float> y;
  long calls = 1;  // per batch
  int copies = 1;
  std::vector<int> order{0};  // the copies in a shuffled order: no call continues the last one's stream
  std::vector<double> ns;
};

std::vector<uint8_t> random_weights(quant::GGMLType type, int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> buf(quant::row_bytes(type, count));
  for (int64_t i = 0; i < count; ++i) {
    const float v = normal(rng);
    if (type == quant::GGMLType::F32) {
      std::memcpy(buf.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = type == quant::GGMLType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
  return buf;
}

void run(Case& c, long calls) {
  const cpu::DotKernel& k = cpu::dot_kernel(c.type, c.isa);
  const void* acts[cpu::kMaxActGroup];
  float* outs[cpu::kMaxActGroup];
  for (int a = 0; a < c.nact; ++a) {
    acts[a] = c.x.data() + a * c.cols;
    outs[a] = c.y.data() + a * c.rows;
  }
  const std::size_t stride = quant::row_bytes(c.type, c.cols);
  const std::size_t bytes = stride * static_cast<std::size_t>(c.rows);
  for (long i = 0; i < calls; ++i)
    cpu::dot_rows_acts(k, c.cols,
                       c.w.data() + static_cast<std::size_t>(c.order[static_cast<std::size_t>(i % c.copies)]) * bytes,
                       stride, c.rows, acts, c.nact, outs);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  bool l3 = false;
  std::vector<cpu::Isa> isas;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--l3") {
      l3 = true;
    } else if (a == "--isas" && i + 1 < argc) {
      std::string list = argv[++i];
      for (std::size_t p = 0; p <= list.size();) {
        const std::size_t e = std::min(list.find(',', p), list.size());
        const std::string name = list.substr(p, e - p);
        bool found = false;
        for (cpu::Isa isa : cpu::all_isas())
          if (name == cpu::isa_name(isa) && cpu::isa_supported(isa)) {
            isas.push_back(isa);
            found = true;
          }
        if (!found) {
          std::fprintf(stderr, "float_rows_bench: no runnable kernel path named '%s'\n", name.c_str());
          return 2;
        }
        p = e + 1;
      }
    } else {
      std::fprintf(stderr, "usage: float_rows_bench [--reps N] [--isas avx2,avx512] [--l3]\n");
      return 2;
    }
  }
  if (isas.empty())
    for (cpu::Isa isa : cpu::compiled_isas())
      if (cpu::isa_supported(isa) && isa != cpu::Isa::Scalar) isas.push_back(isa);
  std::mt19937 rng(1);
  std::vector<Case> cases;
  for (quant::GGMLType type : {quant::GGMLType::F32, quant::GGMLType::F16, quant::GGMLType::BF16})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{24, 1536}, {16, 384}})
      for (int nact : {1, 2, 4})
        for (cpu::Isa isa : isas) {
          Case c{type, isa, rows, cols, nact, random_weights(type, rows * cols, rng), {}, {}, 1, 1, {0}, {}};
          if (l3) {
            const std::size_t bytes = c.w.size();
            c.copies = static_cast<int>((std::size_t{4} << 20) / bytes + 1);
            c.w.resize(bytes * static_cast<std::size_t>(c.copies));
            for (int k = 1; k < c.copies; ++k)
              std::memcpy(c.w.data() + static_cast<std::size_t>(k) * bytes, c.w.data(), bytes);
            c.order.resize(static_cast<std::size_t>(c.copies));
            for (int k = 0; k < c.copies; ++k) c.order[static_cast<std::size_t>(k)] = k;
            std::shuffle(c.order.begin(), c.order.end(), rng);
          }
          c.x.resize(static_cast<std::size_t>(nact * cols));
          std::normal_distribution<float> normal(0.0f, 1.0f);
          for (float& v : c.x) v = normal(rng);
          c.y.resize(static_cast<std::size_t>(nact * rows));
          cases.push_back(std::move(c));
        }
  for (Case& c : cases) {  // calibrate: a batch of about 1 ms
    const auto t0 = Clock::now();
    run(c, 100);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / 100;
    c.calls = std::max(1L, static_cast<long>(1e6 / std::max(ns, 1.0)));
  }
  for (int r = 0; r < reps; ++r)
    for (Case& c : cases) {
      const auto t0 = Clock::now();
      run(c, c.calls);
      c.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                     static_cast<double>(c.calls));
    }
  std::printf("| type | matrix | activations | path | ns per call | ns per activation |\n|---|---|---|---|---|---|\n");
  for (Case& c : cases) {
    const double m = median(c.ns);
    std::printf("| %s | %lld x %lld | %d | %s | %.0f | %.0f |\n", quant::type_name(c.type),
                static_cast<long long>(c.rows), static_cast<long long>(c.cols), c.nact, cpu::isa_name(c.isa), m,
                m / c.nact);
  }
  return 0;
}
