#pragma once
// CPU features: what the build contains and what this processor can run. Kernel dispatch picks
// the best ISA that is both compiled in and supported, unless forced (tests force each path, the
// STRATA_ISA setting forces a lower one: cpu/cpu_settings.h).
//
// x86-64: Avx2 = AVX2 + FMA + F16C; Avx512 = that plus AVX-512 F/BW/VL/DQ and VNNI, with the OS
// saving the opmask and ZMM state (XCR0 read by XGETBV), since CPUID alone says what the core has,
// not what the kernel lets a process use.
//
// AMX (Advanced Matrix Extensions: eight tile registers of up to 16 rows x 64 bytes, TDPBSUD
// multiplying int8 tiles into int32 ones) is an extension of the Avx512 path, not an ISA of its
// own: where it is usable, the multi-activation kernels of the repacked Q8_0 / Q4_0 weights run on
// tiles (cpu/amx/), everything else stays AVX-512. CPUID is not enough to use it: the OS must
// enable the tile state (XCR0 bits 17-18), Linux must grant this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM)), and a one-time probe must run small tile products on three
// threads, with sleeps between uses, in a child process, and get the right answers (some VMs
// advertise AMX and fault on it, one of them only after the first use).
//
// AArch64: Neon = plain ARMv8-A (NEON is mandatory; int8 dots by widening multiplies), the
// baseline the whole library is built for; NeonDotprod = that plus SDOT (ARMv8.2 dotprod);
// NeonI8mm = that plus SMMLA (ARMv8.6 i8mm). Both extensions are read from the OS at run time
// (Linux: getauxval HWCAP_ASIMDDP / HWCAP2_I8MM; macOS: sysctl hw.optional.arm.FEAT_*), and their
// kernels are built with per-folder -march flags, so one AArch64 build runs on any ARMv8 core.
#include <string>
#include <vector>

namespace strata::cpu {

enum class Isa { Scalar = 0, Avx2 = 1, Neon = 2, Avx512 = 3, NeonDotprod = 4, NeonI8mm = 5 };

const char* isa_name(Isa isa);     // "scalar", "avx2", "avx512", "neon", "neon-dotprod", "neon-i8mm"
std::vector<Isa> all_isas();       // every path any build may have, for name lookups
std::vector<Isa> compiled_isas();  // always includes Scalar
bool isa_supported(Isa isa);       // compiled in and runnable on this processor
bool cpu_is_intel();               // CPUID's vendor string is "GenuineIntel" (false off x86)
// The avx512 path is runnable and CPUID reports AVX512_VBMI: the IQ2 and IQ3 kernels then look their
// grids up with vpermi2b / vpermi2w (cpu/avx512/dot_iq_vbmi.cpp). force_avx512_vbmi(false) turns that off (tests,
// comparisons); forcing it on where the CPU lacks it throws strata::Error (Value).
bool cpu_has_avx512_vbmi();
void force_avx512_vbmi(bool on);
Isa best_isa();
// The ISA kernels dispatch to. Defaults to STRATA_ISA when set and runnable, else best_isa();
// force_isa() switches it (tests, benchmarks, strata.Config.isa).
Isa active_isa();
void force_isa(Isa isa);                    // throws strata::Error (Value) when not supported here
std::vector<std::string> build_features();  // e.g. {"scalar", "avx2", "fma", "f16c", "avx512"}
// True when kernels of `isa` may run AVX2 code too (Avx512 is a superset of Avx2).
inline bool isa_has_avx2(Isa isa) { return isa == Isa::Avx2 || isa == Isa::Avx512; }
// True for the AArch64 paths (each runs NEON code; the higher ones add SDOT, then SMMLA).
inline bool isa_is_neon(Isa isa) { return isa == Isa::Neon || isa == Isa::NeonDotprod || isa == Isa::NeonI8mm; }

struct AmxStatus {
  bool usable = false;
  std::string detail;  // "usable", or why not (the first check that failed)
};
// The detection, run once per process (the first call).
const AmxStatus& amx_status();
// AMX kernels are on: usable, and not turned off (STRATA_ISA naming a path other than auto or
// avx512+amx, force_amx(false)). dot_kernel(type, Isa::Avx512) then returns the AMX kernels.
bool amx_enabled();
void force_amx(bool on);  // throws strata::Error (Value) naming amx_status().detail when on and not usable
// The kernel path in words: isa_name(active_isa()), or "avx512+amx" while AMX is on.
const char* active_path_name();
inline constexpr const char* kAmxPathName = "avx512+amx";

// The detection itself, with `probe` as the tile computation (tests pass a failing one); it runs
// only when CPUID, XCR0 and arch_prctl allow AMX. A probe returns true when its result is right.
using AmxProbeFn = bool (*)();
AmxStatus detect_amx(AmxProbeFn probe);
// Runs probe() in a child process (fork; the caller's threads, memory and signal handlers are left
// alone) and waits up to timeout_ms for it: false, with `why` saying so, when the child ended by a
// signal (a tile instruction that faults raises SIGILL on any of the probe's threads), returned
// false, or did not finish in time (then it is killed). Where there is no fork: false.
bool run_probe_in_child(AmxProbeFn probe, std::string& why, int timeout_ms = 10000);
// Tests only: replace the detected status (not synchronised with running kernels).
void set_amx_status_for_testing(const AmxStatus& s);

}  // namespace strata::cpu
