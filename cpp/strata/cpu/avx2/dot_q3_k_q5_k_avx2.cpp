// AVX2 dots of Q3_K and Q5_K with Q8_K activations. Both keep the weights unsigned for maddubs:
// Q3_K multiplies q + 4 (0..7, the high bit set means +4) and subtracts 4·Σ scale·bsum once per
// super-block (as Q6_K's offset); Q5_K is Q4_K with the fifth bit OR-ed in, its mins taken from
// the activation block sums. Group scales are applied with madd in int32.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ3_K;
using quant::BlockQ5_K;
using quant::BlockQ8_K;

// Lanes 0..7 take int16 lane a, lanes 8..15 int16 lane b (of each 128-bit half's own copy).
inline __m256i split_i16(__m256i v, int a, int b) {
  const short sa = static_cast<short>(((2 * a + 1) << 8) | (2 * a));
  const short sb = static_cast<short>(((2 * b + 1) << 8) | (2 * b));
  return _mm256_shuffle_epi8(v, _mm256_setr_epi16(sa, sa, sa, sa, sa, sa, sa, sa, sb, sb, sb, sb, sb, sb, sb, sb));
}
inline __m256i broadcast_i16(__m256i v, int i) {
  const short sel = static_cast<short>(((2 * i + 1) << 8) | (2 * i));
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(sel));
}

// The 16 signed Q3_K scales (already minus 32) as int8, from their 12 packed bytes.
inline __m128i q3_k_scales(const uint8_t* s) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[3];
  std::memcpy(aux, s, 12);
  const uint32_t a0 = (aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4);
  const uint32_t a1 = (aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4);
  const uint32_t a2 = ((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4);
  const uint32_t a3 = ((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4);
  const __m128i u =
      _mm_set_epi32(static_cast<int>(a3), static_cast<int>(a2), static_cast<int>(a1), static_cast<int>(a0));
  return _mm_sub_epi8(u, _mm_set1_epi8(32));
}

// A Q3_K block's unpacked weights and scales, shared by every activation row it meets (the
// multi-activation kernel of prefill and verification windows unpacks each block once). The
// operations and their order are dot_q3_k's below, so both give the same bits (test_quant_gemv
// checks it); the single dots keep their fused loops, which hold the unpacked block in registers
// (through a prepared block in L1 a Q5_K_M decode step ran 20 % slower). Q5_K's multi-activation
// kernel shares Q4_K's (dot_k_avx2.cpp).
struct Q3KPrep {
  __m256i q[8];   // step 4h + s: the 3-bit weights + 4 of columns 128h + 32s .. + 32
  __m256i sc[8];  // step 4h + s: its two scales (low lane, high lane) as int16
  __m256i scales16;
  float xd;
};

inline void prep_q3_k(const BlockQ3_K& x, Q3KPrep& p) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m1 = _mm256_set1_epi8(1);
  p.scales16 = _mm256_cvtepi8_epi16(q3_k_scales(x.scales));
  const __m256i hbits = loadu256(x.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i q2bits = loadu256(x.qs + 32 * h);
    const __m256i sc = h == 0 ? _mm256_permute4x64_epi64(p.scales16, 0x44) : _mm256_permute4x64_epi64(p.scales16, 0xEE);
    for (int s = 0; s < 4; ++s) {
      const int bit = 4 * h + s;
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2 * s), m3);
      const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, bit), m1), 2);
      p.q[bit] = _mm256_or_si256(lo, hi);
      p.sc[bit] = split_i16(sc, 2 * s, 2 * s + 1);
    }
  }
  p.xd = fp16(x.d);
}

inline void acc_q3_k(const Q3KPrep& p, const BlockQ8_K& y, __m256& acc) {
  const float d = y.d * p.xd;
  const __m256i offset = _mm256_madd_epi16(p.scales16, loadu256(y.bsums));
  __m256i sumi = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k)
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p.sc[k], _mm256_maddubs_epi16(p.q[k], loadu256(y.qs + 32 * k))));
  sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 2));
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

float dot_q3_k(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* y) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const __m256i scales16 = _mm256_cvtepi8_epi16(q3_k_scales(x[i].scales));
    const __m256i offset = _mm256_madd_epi16(scales16, loadu256(y[i].bsums));
    const __m256i hbits = loadu256(x[i].hmask);
    const uint8_t* q3 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q2bits = loadu256(q3);
      q3 += 32;
      const __m256i sc = h == 0 ? _mm256_permute4x64_epi64(scales16, 0x44) : _mm256_permute4x64_epi64(scales16, 0xEE);
      for (int s = 0; s < 4; ++s) {
        const int bit = 4 * h + s;
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2 * s), m3);
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, bit), m1), 2);
        __m256i p = _mm256_maddubs_epi16(_mm256_or_si256(lo, hi), loadu256(q8));
        q8 += 32;
        p = _mm256_madd_epi16(split_i16(sc, 2 * s, 2 * s + 1), p);
        sumi = _mm256_add_epi32(sumi, p);
      }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 2));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

float dot_q5_k(int64_t nb, const BlockQ5_K* x, const BlockQ8_K* y) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const float dmin = -y[i].d * fp16(x[i].dmin);
    // The 12 scale bytes as 8 scales (bytes 0..7) and 8 mins (bytes 8..15), as for Q4_K.
    uint32_t utmp[4];
    std::memcpy(utmp, x[i].scales, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    const __m256i mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
        static_cast<int>(utmp[3]), static_cast<int>(utmp[2]), static_cast<int>(utmp[1]), static_cast<int>(utmp[0])));
    const __m256i q8sums = loadu256(y[i].bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    const __m128i prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
    acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
    const __m128i sc128 = _mm256_extracti128_si256(mins_and_scales, 0);
    const __m256i scales = _mm256_set_m128i(sc128, sc128);

    const __m256i hbits = loadu256(x[i].qh);
    const uint8_t* q5 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q4bits = loadu256(q5);
      q5 += 32;
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), m1), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), m1), 4);
      const __m256i q5l = _mm256_or_si256(_mm256_and_si256(q4bits, m4), h_lo);
      const __m256i q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4), h_hi);
      __m256i pl = _mm256_maddubs_epi16(q5l, loadu256(q8));
      __m256i ph = _mm256_maddubs_epi16(q5h, loadu256(q8 + 32));
      q8 += 64;
      pl = _mm256_madd_epi16(broadcast_i16(scales, 2 * j), pl);
      ph = _mm256_madd_epi16(broadcast_i16(scales, 2 * j + 1), ph);
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
  return hsum(acc) + _mm_cvtss_f32(acc_m);
}

// One row against A activations: each block unpacked once.
template <int A>
struct Q3KRowActs {
  static void run(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
    __m256 acc[A];
    for (int a = 0; a < A; ++a) acc[a] = _mm256_setzero_ps();
    Q3KPrep p;
    for (int64_t i = 0; i < nb; ++i) {
      prep_q3_k(x[i], p);
      for (int a = 0; a < A; ++a) acc_q3_k(p, y[a][i], acc[a]);
    }
    for (int a = 0; a < A; ++a) outs[a][r] = hsum(acc[a]);
  }
};

}  // namespace

void dot_rows_q3_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ3_K, dot_q3_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ5_K, dot_q5_k>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q3_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ3_K, Q3KRowActs, 4>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
