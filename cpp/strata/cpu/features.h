#pragma once
// CPU features: what the build contains and what this processor can run. Kernel dispatch picks
// the best ISA that is both compiled in and supported, unless forced (tests force each path).
#include <string>
#include <vector>

namespace strata::cpu {

enum class Isa { Scalar = 0, Avx2 = 1, Neon = 2 };

const char* isa_name(Isa isa);
std::vector<Isa> compiled_isas();   // always includes Scalar
bool isa_supported(Isa isa);        // compiled in and runnable on this processor
Isa best_isa();
// The ISA kernels dispatch to. Defaults to best_isa(); force_isa() switches it (tests, benchmarks).
Isa active_isa();
void force_isa(Isa isa);  // throws strata::Error (Value) when not supported here
std::vector<std::string> build_features();  // e.g. {"scalar", "avx2", "fma", "f16c"}

}  // namespace strata::cpu
