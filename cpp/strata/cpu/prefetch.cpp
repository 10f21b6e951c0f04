#include "strata/cpu/prefetch.h"

#include "strata/cpu/cpu_settings.h"
#include "strata/cpu/features.h"

namespace strata::cpu {

bool prefetch_pays(bool x86, bool intel, bool avx512) { return x86 && (intel || !avx512); }

std::size_t default_prefetch_bytes(quant::GGMLType repacked, bool pays) {
  if (!pays) return 0;
  // Q8_0_R16: ~ one 1088-byte block pair ahead; Q4_0_R16: ~ 3.5 pairs of 576 bytes. Q4_K_R16 and Q6_K_R16,
  // a Q4_K_M file's two types, measured together: 2048 first, 1024 since session 26 (a Sapphire Rapids-class
  // Xeon VM, medium Q4_K_M: decode +1.5-1.7 % at one and two threads, three alternations each; from memory
  // Q4_K_R16 15.4-16.1 against 14.4-14.8 GB/s, Q6_K_R16 13.7-14.1 against 13.4-13.6). On an AMD Zen 3 (session
  // 38, small models, medians of 4 alternations) Q4_K_M decoded 71.6 / 117.7 tok/s at one / two threads without,
  // 73.4 / 127.8 at 1024 and 66-74 / 109-126 at 2048.
  switch (repacked) {
    case quant::GGMLType::Q8_0_R16:
    case quant::GGMLType::Q2_K_R16:
    case quant::GGMLType::Q3_K_R16:
    case quant::GGMLType::Q4_K_R16:
    case quant::GGMLType::Q5_K_R16:  // Q4_K_R16's layout and read pattern (not measured on its own)
    case quant::GGMLType::Q6_K_R16: return 1024;
    case quant::GGMLType::Q4_0_R16: return 2048;
    default: return 0;
  }
}

std::size_t gemv_prefetch_bytes(quant::GGMLType repacked) {
  const auto& setting = process_cpu_settings().prefetch;  // both read once per process
  if (setting) return *setting;
  static const bool pays = prefetch_pays(isa_supported(Isa::Avx2), cpu_is_intel(), isa_supported(Isa::Avx512));
  return default_prefetch_bytes(repacked, pays);
}

}  // namespace strata::cpu
