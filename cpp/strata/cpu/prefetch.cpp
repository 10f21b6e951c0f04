#include "strata/cpu/prefetch.h"

#include <cstring>

#include "strata/cpu/cpu_settings.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace strata::cpu {

bool cpu_is_intel() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char v[13];
  std::memcpy(v, &b, 4);
  std::memcpy(v + 4, &d, 4);
  std::memcpy(v + 8, &c, 4);
  v[12] = '\0';
  return std::strcmp(v, "GenuineIntel") == 0;
#else
  return false;
#endif
}

std::size_t default_prefetch_bytes(quant::GGMLType repacked, bool intel) {
  if (!intel) return 0;
  switch (repacked) {
    case quant::GGMLType::Q8_0_R16: return 1024;  // ~ one 1088-byte block pair ahead
    case quant::GGMLType::Q4_0_R16: return 2048;  // ~ 3.5 pairs of 576 bytes
    case quant::GGMLType::Q4_K_R16:               // a Q4_K_M file's two types, measured together
    case quant::GGMLType::Q6_K_R16: return 2048;
    default: return 0;
  }
}

std::size_t gemv_prefetch_bytes(quant::GGMLType repacked) {
  static const bool intel = cpu_is_intel();
  const auto& setting = process_cpu_settings().prefetch;
  return setting ? *setting : default_prefetch_bytes(repacked, intel);
}

}  // namespace strata::cpu
