#pragma once
// CPU features: what the build contains and what this processor can run. Kernel dispatch picks
// the best ISA that is both compiled in and supported, unless forced (tests force each path, the
// STRATA_ISA setting forces a lower one: cpu/cpu_settings.h).
//
// x86-64: Avx2 = AVX2 + FMA + F16C; Avx512 = that plus AVX-512 F/BW/VL/DQ and VNNI, with the OS
// saving the opmask and ZMM state (XCR0 read by XGETBV), since CPUID alone says what the core has,
// not what the kernel lets a process use.
#include <string>
#include <vector>

namespace strata::cpu {

enum class Isa { Scalar = 0, Avx2 = 1, Neon = 2, Avx512 = 3 };

const char* isa_name(Isa isa);
std::vector<Isa> compiled_isas();  // always includes Scalar
bool isa_supported(Isa isa);       // compiled in and runnable on this processor
Isa best_isa();
// The ISA kernels dispatch to. Defaults to STRATA_ISA when set and runnable, else best_isa();
// force_isa() switches it (tests, benchmarks, strata.Config.isa).
Isa active_isa();
void force_isa(Isa isa);                    // throws strata::Error (Value) when not supported here
std::vector<std::string> build_features();  // e.g. {"scalar", "avx2", "fma", "f16c", "avx512"}
// True when kernels of `isa` may run AVX2 code too (Avx512 is a superset of Avx2).
inline bool isa_has_avx2(Isa isa) { return isa == Isa::Avx2 || isa == Isa::Avx512; }

}  // namespace strata::cpu
