#include "strata/cpu/prefetch.h"

#include "strata/cpu/cpu_settings.h"
#include "strata/cpu/features.h"

namespace strata::cpu {

bool prefetch_pays(bool x86, bool intel, bool avx512) { return x86 && (intel || !avx512); }

std::size_t default_prefetch_bytes(quant::GGMLType repacked, bool pays, Isa path) {
  if (!pays) return 0;
  // Q8_0_R16: ~ one 1088-byte block pair ahead; Q4_0_R16: ~ 3.5 pairs of 576 bytes. The K-quant types, a
  // Q4_K_M file's Q4_K_R16 and Q6_K_R16 measured together: the AVX-512 kernels prefetch a super-block's
  // bytes at its start, best at 1024 since session 26 (a Sapphire Rapids-class Xeon VM, medium Q4_K_M:
  // decode +1.5-1.7 % over 2048 at one and two threads; from memory Q4_K_R16 15.4-16.1 against 14.4-14.8
  // GB/s). The AVX2 kernels prefetch a line or three per step instead (a 36-53-line burst per super-block
  // kept fewer lines in flight: on an AMD Zen 3, Q4_K_R16 12-14 GB/s from memory at any distance), best at
  // 2048-4096 (session 39, the same Zen 3, small Q4_K_M, three alternations: decode 97-102 / 152-159 tok/s at
  // one / two threads against 79-88 / 121-142 at 1024 and 63-74 / 100-126 without).
  const std::size_t k_quant = path == Isa::Avx512 ? 1024 : 2048;
  switch (repacked) {
    case quant::GGMLType::Q8_0_R16: return 1024;
    case quant::GGMLType::Q2_K_R16:
    case quant::GGMLType::Q3_K_R16:
    case quant::GGMLType::Q4_K_R16:
    case quant::GGMLType::Q5_K_R16:  // Q4_K_R16's layout and read pattern (not measured on its own)
    case quant::GGMLType::Q6_K_R16: return k_quant;
    case quant::GGMLType::Q4_0_R16:
    case quant::GGMLType::Q5_0_R16:
    case quant::GGMLType::Q5_1_R16:
    case quant::GGMLType::IQ4_NL_R16:
      return 2048;  // Q4_0_R16's distance (its 576-byte pairs; the others' not measured)
    default: return 0;
  }
}

std::size_t gemv_prefetch_bytes(quant::GGMLType repacked) {
  const auto& setting = process_cpu_settings().prefetch;  // both read once per process
  if (setting) return *setting;
  static const bool pays = prefetch_pays(isa_supported(Isa::Avx2), cpu_is_intel(), isa_supported(Isa::Avx512));
  return default_prefetch_bytes(repacked, pays, active_isa());
}

}  // namespace strata::cpu
