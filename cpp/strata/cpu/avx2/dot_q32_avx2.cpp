// AVX2 dots of the 32-value block formats (Q4_0, Q5_0, Q8_0) with Q8_0 activations: one 256-bit
// integer multiply-add per block, f32 accumulation in two interleaved accumulators.
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

// Signed 32 weight bytes of block i.
struct Q4_0Bytes {
  static __m256i get(const BlockQ4_0& b) {
    return _mm256_sub_epi8(bytes_from_nibbles_32(b.qs), _mm256_set1_epi8(8));
  }
};
struct Q5_0Bytes {
  static __m256i get(const BlockQ5_0& b) {
    const __m256i lo = bytes_from_nibbles_32(b.qs);
    // Where bit 4 is clear the value is lo - 16: set the byte's top nibble (two's complement).
    const __m256i hi = _mm256_andnot_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(lo, hi);
  }
};
struct Q8_0Bytes {
  static __m256i get(const BlockQ8_0& b) { return loadu256(b.qs); }
};

template <typename Block, typename Bytes>
inline float dot_row(int64_t nb, const Block* x, const BlockQ8_0* y) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256 d0 = _mm256_set1_ps(fp16(x[i].d) * fp16(y[i].d));
    const __m256 d1 = _mm256_set1_ps(fp16(x[i + 1].d) * fp16(y[i + 1].d));
    const __m256 p0 = mul_sum_i8_pairs_float(Bytes::get(x[i]), loadu256(y[i].qs));
    const __m256 p1 = mul_sum_i8_pairs_float(Bytes::get(x[i + 1]), loadu256(y[i + 1].qs));
    acc0 = _mm256_fmadd_ps(d0, p0, acc0);
    acc1 = _mm256_fmadd_ps(d1, p1, acc1);
  }
  if (i < nb) {
    const __m256 d0 = _mm256_set1_ps(fp16(x[i].d) * fp16(y[i].d));
    acc0 = _mm256_fmadd_ps(d0, mul_sum_i8_pairs_float(Bytes::get(x[i]), loadu256(y[i].qs)), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

template <typename Block, typename Bytes>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot_row<Block, Bytes>(nb, reinterpret_cast<const Block*>(p + static_cast<std::size_t>(r) * stride), y);
}

}  // namespace

void dot_rows_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ4_0, Q4_0Bytes>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ5_0, Q5_0Bytes>(n, w, stride, nrows, act, out);
}
void dot_rows_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ8_0, Q8_0Bytes>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx2
