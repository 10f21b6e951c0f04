#include "strata/cpu/features.h"

#include <atomic>

#include "strata/cpu/cpu_settings.h"
#include "strata/util/error.h"

#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define STRATA_X86_CPUID 1
#endif

#if defined(STRATA_HAVE_NEON_TU) && defined(__linux__)
#include <sys/auxv.h>
#define STRATA_ARM_HWCAP 1
#elif defined(STRATA_HAVE_NEON_TU) && defined(__APPLE__)
#include <sys/sysctl.h>
#define STRATA_ARM_SYSCTL 1
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

#if defined(STRATA_HAVE_NEON_TU)
struct ArmFeatures {
  bool dotprod = false;
  bool i8mm = false;
};

#if defined(STRATA_ARM_SYSCTL)
bool sysctl_flag(const char* name) {
  int v = 0;
  size_t size = sizeof v;
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}
#endif

// What the OS reports this core runs (the kernel sets the bits only when user space may use the
// instructions). Read once, like CPUID.
const ArmFeatures& arm_features() {
  static const ArmFeatures f = [] {
    ArmFeatures r;
#if defined(STRATA_ARM_HWCAP)
    // Linux arch/arm64/include/uapi/asm/hwcap.h (spelled out: older libc headers lack HWCAP2_I8MM).
    constexpr unsigned long kHwcapAsimdDp = 1ul << 20, kHwcap2I8mm = 1ul << 13;
    r.dotprod = (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
    r.i8mm = r.dotprod && (getauxval(AT_HWCAP2) & kHwcap2I8mm) != 0;
#elif defined(STRATA_ARM_SYSCTL)
    r.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    r.i8mm = r.dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
#endif
    return r;
  }();
  return f;
}
#endif

}  // namespace

std::vector<Isa> all_isas() {
  return {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::NeonDotprod, Isa::NeonI8mm};
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    case Isa::Avx512: return "avx512";
    case Isa::NeonDotprod: return "neon-dotprod";
    case Isa::NeonI8mm: return "neon-i8mm";
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
  v.insert(v.end(), {Isa::Neon, Isa::NeonDotprod, Isa::NeonI8mm});
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
    case Isa::NeonDotprod:
#if defined(STRATA_HAVE_NEON_TU)
      return arm_features().dotprod;
#else
      return false;
#endif
    case Isa::NeonI8mm:
#if defined(STRATA_HAVE_NEON_TU)
      return arm_features().i8mm;
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  if (isa_supported(Isa::NeonI8mm)) return Isa::NeonI8mm;
  if (isa_supported(Isa::NeonDotprod)) return Isa::NeonDotprod;
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
  v.insert(v.end(), {"neon", "dotprod", "i8mm"});
#endif
  return v;
}

}  // namespace strata::cpu
