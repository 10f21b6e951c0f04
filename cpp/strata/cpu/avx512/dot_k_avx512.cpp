// AVX-512 dots of the 256-value super-block formats (Q2_K, Q4_K, Q6_K, IQ4_XS) with Q8_K
// activations. The AVX2 scheme (cpu/avx2/dot_k_avx2.cpp) on 64 weights per instruction: unsigned
// weight bytes x signed activations through maddubs into int16 pairs, then the group scales
// applied and accumulated in int32 by one VNNI vpdpwssd (madd + add fused). Each 128-bit lane of a
// 512-bit product belongs to one scale group, so the scales are spread with one vpermw. The min
// terms come from the activation block sums as in AVX2. IQ4_XS: four groups per codebook lookup,
// the sign moved onto the activations (AVX-512 has no vpsignb). Integer parts are exact; only the
// f32 accumulation order differs from the scalar path.
#include <cstring>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// vpermw indices: 128-bit lane l of the result takes int16 lane (base + l) of the source.
inline __m512i lanes_idx(int base) {
  const __m256i lo = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(base + 1)), _mm_set1_epi16(static_cast<short>(base)));
  const __m256i hi =
      _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(base + 3)), _mm_set1_epi16(static_cast<short>(base + 2)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
// 256-bit half h of the result takes int16 lane a (h = 0) or b (h = 1).
inline __m512i halves_idx(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(a)), _mm256_set1_epi16(static_cast<short>(b)), 1);
}

inline float hsum128(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}
inline float hsum256(__m256 x) { return hsum128(_mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1))); }

float dot_q2_k(int64_t nb, const BlockQ2_K* x, const BlockQ8_K* y) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0xF);
  const __m512i shift01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i shift23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const float dmin = -y[i].d * fp16(x[i].dmin);
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const __m128i mins_and_scales = loadu128(x[i].scales);
    const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(mins_and_scales, 4), m4);
    const __m256i prod = _mm256_madd_epi16(_mm256_cvtepi8_epi16(mins8), loadu256(y[i].bsums));
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc_m);
    const __m512i scales = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_and_si128(mins_and_scales, m4)));

    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 2; ++j) {
      const __m512i q2bits = _mm512_broadcast_i64x4(loadu256(q2));
      q2 += 32;
      const __m512i a = _mm512_and_si512(_mm512_srlv_epi64(q2bits, shift01), m3);  // chunks 0, 1
      const __m512i b = _mm512_and_si512(_mm512_srlv_epi64(q2bits, shift23), m3);  // chunks 2, 3
      const __m512i pa = _mm512_maddubs_epi16(a, loadu512(q8));
      const __m512i pb = _mm512_maddubs_epi16(b, loadu512(q8 + 64));
      q8 += 128;
      sumi = _mm512_dpwssd_epi32(sumi, pa, _mm512_permutexvar_epi16(lanes_idx(8 * j), scales));
      sumi = _mm512_dpwssd_epi32(sumi, pb, _mm512_permutexvar_epi16(lanes_idx(8 * j + 4), scales));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc) + hsum256(acc_m);
}

float dot_q4_k(int64_t nb, const BlockQ4_K* x, const BlockQ8_K* y) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  const __m512i m4 = _mm512_set1_epi8(0xF);
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const float dmin = -y[i].d * fp16(x[i].dmin);
    // The 12 scale bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15).
    uint32_t utmp[4];
    std::memcpy(utmp, x[i].scales, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    const __m256i mins_and_scales = _mm256_cvtepu8_epi16(
        _mm_set_epi32(static_cast<int>(utmp[3]), static_cast<int>(utmp[2]), static_cast<int>(utmp[1]),
                      static_cast<int>(utmp[0])));
    const __m256i q8sums = loadu256(y[i].bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    const __m128i prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
    const __m512i scales = _mm512_castsi256_si512(mins_and_scales);

    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; j += 2) {  // 32-byte chunks j and j + 1: sub-blocks 2j .. 2j + 3
      const __m512i q4bits = loadu512(q4 + 32 * j);
      const __m512i lo = _mm512_and_si512(q4bits, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4bits, 4), m4);
      const __m512i pl = _mm512_maddubs_epi16(lo, load2x256(q8 + 64 * j, q8 + 64 * j + 64));
      const __m512i ph = _mm512_maddubs_epi16(hi, load2x256(q8 + 64 * j + 32, q8 + 64 * j + 96));
      sumi = _mm512_dpwssd_epi32(sumi, pl, _mm512_permutexvar_epi16(halves_idx(2 * j, 2 * j + 2), scales));
      sumi = _mm512_dpwssd_epi32(sumi, ph, _mm512_permutexvar_epi16(halves_idx(2 * j + 1, 2 * j + 3), scales));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc) + hsum128(acc_m);
}

float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  // Σ sc·(q − 32)·a = Σ sc·q·a − 32·Σ sc·bsum, as in AVX2.
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i shift01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i shift23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    const __m256i scales16 = _mm256_cvtepi8_epi16(loadu128(x[i].scales));
    const __m256i offset = _mm256_madd_epi16(scales16, loadu256(y[i].bsums));
    const __m512i scales = _mm512_castsi256_si512(scales16);
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 2; ++j) {
      const __m512i lbits = loadu512(ql);
      ql += 64;
      const __m512i hbits = _mm512_broadcast_i64x4(loadu256(qh));
      qh += 32;
      const __m512i ha = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hbits, shift01), m3), 4);
      const __m512i hb = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hbits, shift23), m3), 4);
      const __m512i a = _mm512_or_si512(_mm512_and_si512(lbits, m4), ha);                         // chunks 0, 1
      const __m512i b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lbits, 4), m4), hb);  // chunks 2, 3
      const __m512i pa = _mm512_maddubs_epi16(a, loadu512(q8));
      const __m512i pb = _mm512_maddubs_epi16(b, loadu512(q8 + 64));
      q8 += 128;
      sumi = _mm512_dpwssd_epi32(sumi, pa, _mm512_permutexvar_epi16(lanes_idx(8 * j), scales));
      sumi = _mm512_dpwssd_epi32(sumi, pb, _mm512_permutexvar_epi16(lanes_idx(8 * j + 4), scales));
    }
    sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

float dot_iq4_xs(int64_t nb, const BlockIQ4_XS* x, const BlockQ8_K* y) {
  // Four groups per step: their 64 code bytes in one load (group g + l in 128-bit lane l), looked
  // up through the codebook for the low and the high nibbles, against the matching 16-value halves
  // of the four groups' activations.
  const __m512i values = _mm512_broadcast_i32x4(loadu128(quant::kIQ4NLValues));
  const __m512i m4 = _mm512_set1_epi8(0xF);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    alignas(16) int16_t ls[8];
    for (int g = 0; g < 8; ++g)
      ls[g] = static_cast<int16_t>((((x[i].scales_l[g / 2] >> (4 * (g % 2))) & 0xF) |
                                    (((x[i].scales_h >> (2 * g)) & 3) << 4)) - 32);
    const __m512i scales = _mm512_castsi128_si512(_mm_load_si128(reinterpret_cast<const __m128i*>(ls)));
    __m512i sumi = _mm512_setzero_si512();
    for (int g = 0; g < 8; g += 4) {
      const __m512i bits = loadu512(qs + 16 * g);
      const __m512i lo = _mm512_shuffle_epi8(values, _mm512_and_si512(bits, m4));
      const __m512i hi = _mm512_shuffle_epi8(values, _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4));
      const __m512i y0 = loadu512(q8 + 32 * g), y1 = loadu512(q8 + 32 * g + 64);
      const __m512i ya = _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(2, 0, 2, 0));  // elements 0..15 of each group
      const __m512i yb = _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(3, 1, 3, 1));  // elements 16..31
      // Signed x signed through maddubs: |w| against y with w's sign.
      const __m512i sa = _mm512_mask_sub_epi8(ya, _mm512_movepi8_mask(lo), _mm512_setzero_si512(), ya);
      const __m512i sb = _mm512_mask_sub_epi8(yb, _mm512_movepi8_mask(hi), _mm512_setzero_si512(), yb);
      const __m512i pa = _mm512_maddubs_epi16(_mm512_abs_epi8(lo), sa);
      const __m512i pb = _mm512_maddubs_epi16(_mm512_abs_epi8(hi), sb);
      const __m512i sc = _mm512_permutexvar_epi16(lanes_idx(g), scales);
      sumi = _mm512_dpwssd_epi32(sumi, pa, sc);
      sumi = _mm512_dpwssd_epi32(sumi, pb, sc);
    }
    const float d = fp16(x[i].d) * y[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

template <typename Block, float (*Dot)(int64_t, const Block*, const BlockQ8_K*)>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = Dot(nb, reinterpret_cast<const Block*>(p + static_cast<std::size_t>(r) * stride), y);
}

}  // namespace

void dot_rows_q2_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ2_K, dot_q2_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ4_K, dot_q4_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockQ6_K, dot_q6_k>(n, w, stride, nrows, act, out);
}
void dot_rows_iq4_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<BlockIQ4_XS, dot_iq4_xs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx512
