#include "strata/cpu/features.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "strata/cpu/cpu_settings.h"
#include "strata/util/error.h"

#if defined(STRATA_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define STRATA_X86_CPUID 1
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#define STRATA_PROBE_CHILD 1
#endif
#if defined(STRATA_X86_CPUID) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(STRATA_HAVE_AMX_TU)
#include "strata/cpu/amx/dot_amx.h"
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
  bool intel = false;  // CPUID's vendor string is "GenuineIntel"
  bool avx2 = false;
  bool avx512 = false;
  bool amx_int8 = false;  // CPUID only: AMX-TILE + AMX-INT8 (detect_amx checks the rest)
  bool vbmi = false;      // AVX-512 VBMI on top of the avx512 path (vpermb / vpermi2b)
};

// Read once: CPUID is slow (a VM exit under virtualisation) and isa_supported runs on every
// kernel dispatch.
const X86Features& x86_features() {
  static const X86Features f = [] {
    X86Features r;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
      char vendor[12];
      std::memcpy(vendor, &b, 4);
      std::memcpy(vendor + 4, &d, 4);
      std::memcpy(vendor + 8, &c, 4);
      r.intel = std::memcmp(vendor, "GenuineIntel", 12) == 0;
    }
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
    r.amx_int8 = (d & (1u << 24)) != 0 && (d & (1u << 25)) != 0;
    r.vbmi = r.avx512 && (c & (1u << 1)) != 0;
    return r;
  }();
  return f;
}
#endif

#if defined(STRATA_X86_CPUID)
// Linux keeps the 8 KiB tile data out of a process's state until the process asks for it; a tile
// instruction before that raises SIGILL. The permission is per process (every thread has it after).
bool request_tile_permission(std::string& why) {
#if defined(__linux__)
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    why = std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused: ") + std::strerror(errno);
    return false;
  }
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 || (granted & (1ul << kXfeatureXtiledata)) == 0) {
    why = "arch_prctl(ARCH_GET_XCOMP_PERM): tile data not granted";
    return false;
  }
  return true;
#else
  why = "tile permission is only requested on Linux";
  return false;
#endif
}
#endif

AmxStatus& amx_status_slot() {
#if defined(STRATA_HAVE_AMX_TU)
  static AmxStatus s = detect_amx(&amx::probe_tiles);
#else
  static AmxStatus s = detect_amx(nullptr);
#endif
  return s;
}

std::atomic<int> g_amx_forced{-1};

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

bool run_probe_in_child(AmxProbeFn probe, std::string& why, int timeout_ms) {
#if defined(STRATA_PROBE_CHILD)
  const pid_t pid = fork();
  if (pid < 0) {
    why = std::string("could not start (fork: ") + std::strerror(errno) + ")";
    return false;
  }
  if (pid == 0) {  // the child: a fault ends it with the signal; _exit skips the parent's atexit work
    signal(SIGILL, SIG_DFL);
    _exit(probe() ? 0 : 1);
  }
  int status = 0;
  const timespec tick{0, 1'000'000};
  for (int waited_ms = 0;; ++waited_ms) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      why = std::string("could not be waited for (") + std::strerror(errno) + ")";
      return false;
    }
    if (waited_ms >= timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      why = "did not finish in " + std::to_string(timeout_ms) + " ms";
      return false;
    }
    nanosleep(&tick, nullptr);
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    why = sig == SIGILL ? std::string("raised SIGILL") : "ended by signal " + std::to_string(sig);
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = "computed a wrong result";
    return false;
  }
  return true;
#else
  (void)probe;
  (void)timeout_ms;
  why = "no child processes on this platform";
  return false;
#endif
}

AmxStatus detect_amx(AmxProbeFn probe) {
#if defined(STRATA_X86_CPUID) && defined(STRATA_HAVE_AMX_TU)
  if (!x86_features().avx512) return {false, "the AVX-512 path it extends does not run here"};
  if (!x86_features().amx_int8) return {false, "CPUID: no AMX-TILE / AMX-INT8"};
  constexpr uint64_t kTileState = (uint64_t{1} << 17) | (uint64_t{1} << 18);  // XTILECFG, XTILEDATA
  if ((xcr0() & kTileState) != kTileState) return {false, "XCR0: the OS has not enabled the tile state"};
  std::string why;
  if (!request_tile_permission(why)) return {false, why};
  if (probe == nullptr) return {false, "no probe"};
  if (!run_probe_in_child(probe, why)) return {false, "the tile probe " + why};
  return {true, "usable"};
#else
  (void)probe;
  return {false, "not in this build (x86-64 with a compiler that has AMX intrinsics)"};
#endif
}

const AmxStatus& amx_status() { return amx_status_slot(); }

void set_amx_status_for_testing(const AmxStatus& s) { amx_status_slot() = s; }

bool amx_enabled() {
  if (!amx_status().usable) return false;
  const int f = g_amx_forced.load(std::memory_order_relaxed);
  if (f >= 0) return f != 0;
  static const bool initial = [] {
    const CpuSettings& s = process_cpu_settings();
    return !s.isa || s.amx;  // auto, or STRATA_ISA=avx512+amx
  }();
  return initial;
}

void force_amx(bool on) {
  if (on && !amx_status().usable) throw_error(ErrorKind::Value, "AMX not available here: " + amx_status().detail);
  g_amx_forced.store(on ? 1 : 0);
}

const char* active_path_name() {
  const Isa isa = active_isa();
  return isa == Isa::Avx512 && amx_enabled() ? kAmxPathName : isa_name(isa);
}

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

namespace {
std::atomic<int> g_vbmi_forced{-1};
bool cpu_vbmi() {
#if defined(STRATA_X86_CPUID) && defined(STRATA_HAVE_AVX512_TU)
  return x86_features().vbmi;
#else
  return false;
#endif
}
}  // namespace

bool cpu_has_avx512_vbmi() {
  const int f = g_vbmi_forced.load(std::memory_order_relaxed);
  return f >= 0 ? f != 0 : cpu_vbmi();
}

void force_avx512_vbmi(bool on) {
  if (on && !cpu_vbmi()) throw_error(ErrorKind::Value, "AVX512_VBMI not available here");
  g_vbmi_forced.store(on ? 1 : 0);
}

bool cpu_is_intel() {
#if defined(STRATA_X86_CPUID)
  return x86_features().intel;
#else
  return false;
#endif
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
  v.insert(v.end(), {"avx512", "avx512vnni", "avx512vbmi"});
#endif
#if defined(STRATA_HAVE_AMX_TU)
  v.push_back("amx-int8");
#endif
#if defined(STRATA_HAVE_NEON_TU)
  v.insert(v.end(), {"neon", "dotprod", "i8mm"});
#endif
  return v;
}

}  // namespace strata::cpu
