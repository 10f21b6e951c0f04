// Calls one dot kernel `reps` times over a 64 × 4096 weight matrix and a set of activations, for
// instruction counts under qemu (tests/cross/count-neon-insns.sh runs it at two rep counts with
// an instruction-counting plugin; the difference is the kernel's).
//   neon_kernel_insns <isa> <type> <activations> <reps>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/quant/types.h"
#include "test_quant_util.h"

int main(int argc, char** argv) {
  namespace cpu = strata::cpu;
  if (argc != 5) {
    std::fprintf(stderr, "usage: neon_kernel_insns <isa> <type> <activations> <reps>\n");
    return 2;
  }
  const std::string isa_name = argv[1];
  const auto type = strata::quant::type_from_name(argv[2]);
  const int nact = std::atoi(argv[3]), reps = std::atoi(argv[4]);
  const cpu::Isa* isa = nullptr;
  const std::vector<cpu::Isa> all = cpu::all_isas();
  for (const cpu::Isa& i : all)
    if (isa_name == cpu::isa_name(i)) isa = &i;
  if (isa == nullptr || !cpu::isa_supported(*isa) || !type || nact < 1 || nact > 16 || reps < 0) {
    std::fprintf(stderr, "neon_kernel_insns: bad or unsupported argument\n");
    return 2;
  }
  const int64_t rows = 64, cols = 4096;
  std::mt19937 rng(1);
  const auto w = quant_test::random_rows(*type, rows, cols, rng);
  const cpu::DotKernel& k = cpu::dot_kernel(*type, *isa);
  const std::size_t ab = cpu::activation_row_bytes(*type, cols);
  std::vector<uint8_t> act(ab * static_cast<std::size_t>(nact));
  std::vector<float> out(static_cast<std::size_t>(rows * nact));
  const void* acts[16];
  float* outs[16];
  for (int a = 0; a < nact; ++a) {
    const auto x = quant_test::random_floats(cols, rng);
    k.quantize_act(x.data(), act.data() + ab * static_cast<std::size_t>(a), cols);
    acts[a] = act.data() + ab * static_cast<std::size_t>(a);
    outs[a] = out.data() + rows * a;
  }
  const std::size_t stride = strata::quant::row_bytes(*type, cols);
  for (int r = 0; r < reps; ++r) cpu::dot_rows_acts(k, cols, w.data(), stride, rows, acts, nact, outs);
  float sum = 0.0f;
  for (float v : out) sum += v;
  std::printf("%s %s x%d: checksum %g\n", argv[1], argv[2], nact, static_cast<double>(sum));
  return 0;
}
