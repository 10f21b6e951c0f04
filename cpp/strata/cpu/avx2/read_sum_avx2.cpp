// The streaming-read loop of cpu/membench.cpp with 256-bit loads, so the bandwidth reference uses
// the same load width as the AVX2 kernels it is compared with.
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/membench.h"

namespace strata::cpu::avx2 {

uint64_t read_sum(const uint64_t* p, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {  // two cache lines per iteration
    a0 = _mm256_add_epi64(a0, loadu256(p + i));
    a1 = _mm256_add_epi64(a1, loadu256(p + i + 4));
    a2 = _mm256_add_epi64(a2, loadu256(p + i + 8));
    a3 = _mm256_add_epi64(a3, loadu256(p + i + 12));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), s);
  uint64_t total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) total += p[i];
  return total;
}

}  // namespace strata::cpu::avx2
