#pragma once
// Software prefetch in the GEMVs over the repacked weights: the single-activation (decode) kernels,
// and the first pass over each 16-row group of the several-activation kernels (a verification
// window's rows; later passes find the group in L1). A decode step streams every weight once; on the
// Intel Xeon these kernels were measured on, one core kept too few lines in flight to reach the
// memory's bandwidth, and prefetching a fixed distance ahead of the block being multiplied gave
// 20-25 % (Q8_0), 45-60 % (Q4_0) and 15-25 % (Q4_K_M) more decode tokens/s; from memory, the
// 2-activation kernels read 13-45 % more GB/s with it on an Ice Lake Xeon. An AMD Zen 3 (AVX2 only)
// gains too: Q4_0 decode +20-28 %, Q8_0 +5-15 %, Q4_K_M +3-9 %. On an AMD Zen 4 the same prefetches
// cost 10-30 % (its hardware prefetchers already keep up, the extra instructions do not pay). So the
// default depends on the CPU (prefetch_pays); STRATA_PREFETCH (cpu/cpu_settings.h, docs/settings.md)
// overrides it. A prefetch never changes a result.
#include <cstddef>
#include <cstdint>

#include "strata/cpu/features.h"
#include "strata/quant/types.h"

namespace strata::cpu {

// Bytes ahead of the current block pair that the GEMV over `repacked` prefetches (0 = none): the
// setting's value, else default_prefetch_bytes for this CPU. Read once per process.
std::size_t gemv_prefetch_bytes(quant::GGMLType repacked);

// Whether software prefetch pays on an x86 CPU: on Intel, and on the other x86 CPUs without AVX-512
// (AMD Zen 1-3); not on the AMD CPUs with AVX-512 (Zen 4 and later). Off x86 no kernel prefetches.
bool prefetch_pays(bool x86, bool intel, bool avx512);

// The auto choice for the kernels of `path`: where prefetch pays 1024 (Q8_0_R16; the K-quant types on the
// AVX-512 path) / 2048 (Q4_0_R16, Q5_0_R16, Q5_1_R16, IQ4_NL_R16; the K-quant types elsewhere), else 0; 0 for other
// types (IQ4_XS_R16: not measured).
std::size_t default_prefetch_bytes(quant::GGMLType repacked, bool pays, Isa path);

// The 64-byte lines of [p, p + n) towards L1 (a hint: never faults, never changes a result).
inline void prefetch_lines(const uint8_t* p, std::size_t n) {
  for (std::size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
}

}  // namespace strata::cpu
