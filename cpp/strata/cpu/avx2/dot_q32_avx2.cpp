// AVX2 dots of the 32-value block formats (Q4_0, Q5_0, Q8_0) with Q8_0 activations.
//
// Four weight rows go through the blocks together so each activation block is loaded (and its
// offset term formed) once per four rows. Per row and block: one 256-bit maddubs over the 32
// weights, madd to int32, one FMA with the block's scale dx·dy. The scales of eight blocks are
// converted at once (F16C) and multiplied by the activation scales, then broadcast from a small
// stack array. Q4_0 / Q5_0 weights are used unsigned (q ∈ [0,15] / [0,31]) and the offset is
// removed in int16 — maddubs(q, y) − maddubs(8 or 16, y) — so no sign trick is needed; Q8_0 keeps
// the sign trick. Every row is computed with the same operations whatever rows share its pass,
// so a row's result does not depend on how rows are grouped.
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

// 16 bytes of nibbles -> 32 bytes: low nibbles in the low lane, high nibbles in the high lane.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m256i both = _mm256_broadcastsi128_si256(loadu128(p));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

// The per-format part: the int16 pair sums of (weight · activation) for one block.
struct Q4_0Ops {
  using Block = BlockQ4_0;
  // Offset term shared by every row of the pass: maddubs(8, y).
  static __m256i offset(__m256i y) { return _mm256_maddubs_epi16(_mm256_set1_epi8(8), y); }
  static __m256i pairs(const Block& b, __m256i y, __m256i off) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles(b.qs), y), off);
  }
};

struct Q5_0Ops {
  using Block = BlockQ5_0;
  static __m256i offset(__m256i y) { return _mm256_maddubs_epi16(_mm256_set1_epi8(16), y); }
  static __m256i pairs(const Block& b, __m256i y, __m256i off) {
    const __m256i hi = _mm256_and_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(0x10));
    const __m256i q = _mm256_or_si256(unpack_nibbles(b.qs), hi);
    return _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), off);
  }
};

struct Q8_0Ops {
  using Block = BlockQ8_0;
  static __m256i offset(__m256i) { return _mm256_setzero_si256(); }
  static __m256i pairs(const Block& b, __m256i y, __m256i) { return mul_add_epi8(loadu256(b.qs), y); }
};

// Eight fp16 scales at a stride of `stride` bytes -> f32.
inline __m256 load_scales8(const uint8_t* p, std::size_t stride) {
  uint16_t h[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&h[k], p + static_cast<std::size_t>(k) * stride, 2);
  return _mm256_cvtph_ps(loadu128(h));
}

// R rows (R ≤ 4) starting at w, all nb blocks; out[r] for r < R.
template <typename Ops, int R>
void dot_rows_group(int64_t nb, const uint8_t* w, std::size_t stride, const BlockQ8_0* y, float* out) {
  using Block = typename Ops::Block;
  const Block* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const Block*>(w + static_cast<std::size_t>(r) * stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  alignas(32) float d[R][8];

  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const __m256 dy = load_scales8(reinterpret_cast<const uint8_t*>(&y[b].d), sizeof(BlockQ8_0));
    for (int r = 0; r < R; ++r)
      _mm256_store_ps(d[r], _mm256_mul_ps(load_scales8(reinterpret_cast<const uint8_t*>(&x[r][b].d), sizeof(Block)), dy));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i yv = loadu256(y[b + k].qs);
      const __m256i off = Ops::offset(yv);
      for (int r = 0; r < R; ++r) {
        const __m256i p = _mm256_madd_epi16(Ops::pairs(x[r][b + k], yv, off), ones);
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]), _mm256_cvtepi32_ps(p), acc[r]);
      }
    }
  }
  for (; b < nb; ++b) {
    const __m256i yv = loadu256(y[b].qs);
    const __m256i off = Ops::offset(yv);
    const float dy = fp16(y[b].d);
    for (int r = 0; r < R; ++r) {
      const __m256i p = _mm256_madd_epi16(Ops::pairs(x[r][b], yv, off), ones);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x[r][b].d) * dy), _mm256_cvtepi32_ps(p), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

template <typename Ops>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / quant::kQK32;
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) dot_rows_group<Ops, 4>(nb, p + static_cast<std::size_t>(r) * stride, stride, y, out + r);
  const uint8_t* rest = p + static_cast<std::size_t>(r) * stride;
  switch (nrows - r) {
    case 3: dot_rows_group<Ops, 3>(nb, rest, stride, y, out + r); break;
    case 2: dot_rows_group<Ops, 2>(nb, rest, stride, y, out + r); break;
    case 1: dot_rows_group<Ops, 1>(nb, rest, stride, y, out + r); break;
    default: break;
  }
}

}  // namespace

void dot_rows_q4_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q4_0Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q5_0Ops>(n, w, stride, nrows, act, out);
}
void dot_rows_q8_0(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<Q8_0Ops>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx2
