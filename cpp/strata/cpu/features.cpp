#include "strata/cpu/features.h"

#include <atomic>

#include "strata/cpu/cpu_settings.h"
#include "strata/util/error.h"

#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define STRATA_X86_CPUID 1
#endif

namespace strata::cpu {
namespace {
std::atomic<int> g_forced{-1};

#if defined(STRATA_X86_CPUID)
// XCR0 through XGETBV (emitted as bytes: the baseline TU is built without -mxsave).
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

struct X86Features {
  bool avx2 = false;
  bool avx512 = false;
};

// Read once: CPUID is slow (a VM exit under virtualisation) and isa_supported runs on every
// kernel dispatch.
const X86Features& x86_features() {
  static const X86Features f = [] {
    X86Features r;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return r;
    const bool fma = (c & (1u << 12)) != 0, osxsave = (c & (1u << 27)) != 0, avx = (c & (1u << 28)) != 0;
    const bool f16c = (c & (1u << 29)) != 0;
    if (!osxsave || !avx) return r;
    const uint64_t xcr = xcr0();
    const bool ymm_state = (xcr & 0x6) == 0x6;    // SSE + AVX state
    const bool zmm_state = (xcr & 0xE6) == 0xE6;  // + opmask, ZMM_Hi256, Hi16_ZMM
    if (!ymm_state || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return r;
    const bool avx2 = (b & (1u << 5)) != 0;
    r.avx2 = avx2 && fma && f16c;
    const bool avx512f = (b & (1u << 16)) != 0, dq = (b & (1u << 17)) != 0, bw = (b & (1u << 30)) != 0,
               vl = (b & (1u << 31)) != 0, vnni = (c & (1u << 11)) != 0;
    r.avx512 = r.avx2 && zmm_state && avx512f && dq && bw && vl && vnni;
    return r;
  }();
  return f;
}
#endif

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

std::vector<Isa> compiled_isas() {
  std::vector<Isa> v{Isa::Scalar};
#if defined(STRATA_HAVE_AVX2_TU)
  v.push_back(Isa::Avx2);
#endif
#if defined(STRATA_HAVE_AVX512_TU)
  v.push_back(Isa::Avx512);
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
#if defined(STRATA_X86_CPUID)
      return x86_features().avx2;
#else
      return false;
#endif
    case Isa::Avx512:
#if defined(STRATA_X86_CPUID) && defined(STRATA_HAVE_AVX512_TU)
      return x86_features().avx512;
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
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  if (isa_supported(Isa::Neon)) return Isa::Neon;
  return Isa::Scalar;
}

Isa active_isa() {
  const int f = g_forced.load(std::memory_order_relaxed);
  if (f >= 0) return static_cast<Isa>(f);
  static const Isa initial = [] {
    const std::optional<Isa> s = process_cpu_settings().isa;
    return s ? *s : best_isa();
  }();
  return initial;
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
#if defined(STRATA_HAVE_AVX512_TU)
  v.insert(v.end(), {"avx512", "avx512vnni"});
#endif
#if defined(STRATA_HAVE_NEON_TU)
  v.push_back("neon");
#endif
  return v;
}

}  // namespace strata::cpu
