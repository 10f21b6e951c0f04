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

namespace {

// Probes the processor once. CPUID traps to the hypervisor in a virtual machine (microseconds
// each), and active_isa() runs on every kernel call, so nothing here may execute it per call.
bool probe_avx2() {
#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
  // f16c is read from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports lacks the name.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

struct Support {
  bool avx2 = probe_avx2();
  Isa best = avx2 ? Isa::Avx2
#if defined(STRATA_HAVE_NEON_TU)
                  : Isa::Neon;
#else
                  : Isa::Scalar;
#endif
};

const Support& support() {
  static const Support s;
  return s;
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return support().avx2;
    case Isa::Neon:
#if defined(STRATA_HAVE_NEON_TU)
      return true;  // NEON is mandatory on AArch64
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() { return support().best; }

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
