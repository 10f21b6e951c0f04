#include "strata/cpu/features.h"

#include <atomic>

#include "strata/util/error.h"

#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace strata::cpu {
namespace {
std::atomic<int> g_forced{-1};
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
  }
  return "?";
}

std::vector<Isa> compiled_isas() {
  std::vector<Isa> v{Isa::Scalar};
#if defined(STRATA_HAVE_AVX2_TU)
  v.push_back(Isa::Avx2);
#endif
#if defined(STRATA_HAVE_NEON_TU)
  v.push_back(Isa::Neon);
#endif
  return v;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2:
#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
    {
      // f16c is read from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports lacks the name.
      // Detected once: CPUID is slow (a VM exit under virtualisation) and this runs on every
      // kernel dispatch.
      static const bool ok = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
      }();
      return ok;
    }
#else
      return false;
#endif
    case Isa::Neon:
#if defined(STRATA_HAVE_NEON_TU)
      return true;  // NEON is mandatory on AArch64
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  if (isa_supported(Isa::Neon)) return Isa::Neon;
  return Isa::Scalar;
}

Isa active_isa() {
  const int f = g_forced.load(std::memory_order_relaxed);
  return f < 0 ? best_isa() : static_cast<Isa>(f);
}

void force_isa(Isa isa) {
  if (!isa_supported(isa)) throw_error(ErrorKind::Value, std::string("ISA not available here: ") + isa_name(isa));
  g_forced.store(static_cast<int>(isa));
}

std::vector<std::string> build_features() {
  std::vector<std::string> v{"scalar"};
#if defined(STRATA_HAVE_AVX2_TU)
  v.insert(v.end(), {"avx2", "fma", "f16c"});
#endif
#if defined(STRATA_HAVE_NEON_TU)
  v.push_back("neon");
#endif
  return v;
}

}  // namespace strata::cpu
