// AVX2 dots of the 256-value super-block formats (Q2_K, Q4_K, Q6_K, IQ4_XS; Q5_K's multi-activation
// kernel, which shares Q4_K's) with Q8_K activations,
// after ggml's AVX2 kernels: unsigned weight bytes x signed activations through maddubs, group
// scales applied with madd in int32, the min terms taken from the activation block sums. IQ4_XS
// decodes two groups per 256-bit codebook lookup.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// Broadcast int16 lane i (0..7) of a 128-bit register pair to every lane.
inline __m256i broadcast_i16(__m256i v, int i) {
  const short sel = static_cast<short>(((2 * i + 1) << 8) | (2 * i));
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(sel));
}
// Lanes 0..7 take int16 lane a, lanes 8..15 int16 lane b (of each 128-bit half's own copy).
inline __m256i split_i16(__m256i v, int a, int b) {
  const short sa = static_cast<short>(((2 * a + 1) << 8) | (2 * a));
  const short sb = static_cast<short>(((2 * b + 1) << 8) | (2 * b));
  return _mm256_shuffle_epi8(v, _mm256_setr_epi16(sa, sa, sa, sa, sa, sa, sa, sa, sb, sb, sb, sb, sb, sb, sb, sb));
}

float dot_q2_k(int64_t nb, const BlockQ2_K* x, const BlockQ8_K* y) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16(x[i].d);
    const float dmin = -y[i].d * fp16(x[i].dmin);
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;

    const __m128i mins_and_scales = loadu128(x[i].scales);
    const __m128i scales8 = _mm_and_si128(mins_and_scales, m4);
    const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(mins_and_scales, 4), m4);
    const __m256i mins = _mm256_cvtepi8_epi16(mins8);
    const __m256i prod = _mm256_madd_epi16(mins, loadu256(y[i].bsums));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);

    const __m256i all_scales = _mm256_cvtepi8_epi16(scales8);
    const __m128i l_scales = _mm256_extracti128_si256(all_scales, 0);
    const __m128i h_scales = _mm256_extracti128_si256(all_scales, 1);
    const __m256i scales[2] = {_mm256_set_m128i(l_scales, l_scales), _mm256_set_m128i(h_scales, h_scales)};

    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i q2bits = loadu256(q2);
      q2 += 32;
      const __m256i q8_0 = loadu256(q8);
      const __m256i q8_1 = loadu256(q8 + 32);
      const __m256i q8_2 = loadu256(q8 + 64);
      const __m256i q8_3 = loadu256(q8 + 96);
      q8 += 128;
      const __m256i q2_0 = _mm256_and_si256(q2bits, m3);
      const __m256i q2_1 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2), m3);
      const __m256i q2_2 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 4), m3);
      const __m256i q2_3 = _mm256_and_si256(_mm256_srli_epi16(q2bits, 6), m3);
      __m256i p0 = _mm256_maddubs_epi16(q2_0, q8_0);
      __m256i p1 = _mm256_maddubs_epi16(q2_1, q8_1);
      __m256i p2 = _mm256_maddubs_epi16(q2_2, q8_2);
      __m256i p3 = _mm256_maddubs_epi16(q2_3, q8_3);
      p0 = _mm256_madd_epi16(split_i16(scales[j], 0, 1), p0);
      p1 = _mm256_madd_epi16(split_i16(scales[j], 2, 3), p1);
      p2 = _mm256_madd_epi16(split_i16(scales[j], 4, 5), p2);
      p3 = _mm256_madd_epi16(split_i16(scales[j], 6, 7), p3);
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// Super-blocks unpacked once (nibbles or 6-bit weights, scales spread per step), then dotted against
// any number of activations: the single- and the multi-activation dots run the same two functions,
// so their results are bitwise equal. (16 ymm registers cannot hold a prepared block: it lives in
// L1, a load per use.)
struct Q4KPrep {
  __m256i q[8];   // chunk j: low nibbles at 2j, high nibbles at 2j + 1
  __m256i sc[8];  // the matching scale in every int16 lane
  __m128i mins;   // the 8 mins as int16
  float xd, xdmin;
};

// Q4_K / Q5_K's 12 scale bytes -> p.mins, p.xd, p.xdmin and the 8 scales (int16) in both lanes.
template <class Block>
inline __m256i prep_scales(const Block& x, Q4KPrep& p) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  // Unpack the 12 scale bytes into 8 scales (bytes 0..7) and 8 mins (bytes 8..15).
  uint32_t utmp[4];
  std::memcpy(utmp, x.scales, 12);
  utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = utmp[1] & kmask1;
  utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kmask1;
  const __m256i mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
      static_cast<int>(utmp[3]), static_cast<int>(utmp[2]), static_cast<int>(utmp[1]), static_cast<int>(utmp[0])));
  p.mins = _mm256_extracti128_si256(mins_and_scales, 1);
  p.xd = fp16(x.d);
  p.xdmin = fp16(x.dmin);
  const __m128i sc128 = _mm256_extracti128_si256(mins_and_scales, 0);
  return _mm256_set_m128i(sc128, sc128);
}

inline void prep_q4_k(const BlockQ4_K& x, Q4KPrep& p) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i scales = prep_scales(x, p);
  for (int j = 0; j < 4; ++j) {
    const __m256i q4bits = loadu256(x.qs + 32 * j);
    p.q[2 * j] = _mm256_and_si256(q4bits, m4);
    p.q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
    p.sc[2 * j] = broadcast_i16(scales, 2 * j);
    p.sc[2 * j + 1] = broadcast_i16(scales, 2 * j + 1);
  }
}

// Q5_K: Q4_K with the fifth bit of chunk j's low nibbles (bit 2j of qh) and high nibbles (bit 2j + 1)
// OR-ed in, the operations of dot_q5_k (dot_q3_k_q5_k_avx2.cpp), which stays a fused loop for one
// activation: through the prepared block in L1 a Q5_K_M decode step ran 20 % slower.
inline void prep_q5_k(const BlockQ5_K& x, Q4KPrep& p) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m1 = _mm256_set1_epi8(1);
  const __m256i scales = prep_scales(x, p);
  const __m256i hbits = loadu256(x.qh);
  for (int j = 0; j < 4; ++j) {
    const __m256i q4bits = loadu256(x.qs + 32 * j);
    const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), m1), 4);
    const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), m1), 4);
    p.q[2 * j] = _mm256_or_si256(_mm256_and_si256(q4bits, m4), h_lo);
    p.q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4), h_hi);
    p.sc[2 * j] = broadcast_i16(scales, 2 * j);
    p.sc[2 * j + 1] = broadcast_i16(scales, 2 * j + 1);
  }
}

inline void acc_q4_k(const Q4KPrep& p, const BlockQ8_K& y, __m256& acc, __m128& acc_m) {
  const float d = y.d * p.xd;
  const float dmin = -y.d * p.xdmin;
  const __m256i q8sums = loadu256(y.bsums);
  const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
  const __m128i prod = _mm_madd_epi16(p.mins, q8s);
  acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
  __m256i sumi = _mm256_setzero_si256();
  for (int k = 0; k < 8; k += 2) {
    const __m256i pl = _mm256_madd_epi16(p.sc[k], _mm256_maddubs_epi16(p.q[k], loadu256(y.qs + 32 * k)));
    const __m256i ph = _mm256_madd_epi16(p.sc[k + 1], _mm256_maddubs_epi16(p.q[k + 1], loadu256(y.qs + 32 * k + 32)));
    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
  }
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

inline float finish_q4_k(__m256 acc, __m128 acc_m) {
  acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
  return hsum(acc) + _mm_cvtss_f32(acc_m);
}

// Q6_K: Σ sc·(q − 32)·a = Σ sc·q·a − 32·Σ sc·bsum: q stays unsigned for maddubs and the offset
// comes from the activation block sums, one madd per super-block.
struct Q6KPrep {
  __m256i q[8];   // the 6-bit weights of the 32-byte steps, in activation order
  __m256i sc[8];  // step k's two scales (low lane, high lane)
  __m256i scales16;
  float xd;
};

inline void prep_q6_k(const BlockQ6_K& x, Q6KPrep& p) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  const __m256i m2 = _mm256_set1_epi8(3);
  p.scales16 = _mm256_cvtepi8_epi16(loadu128(x.scales));
  for (int j = 0; j < 2; ++j) {
    const uint8_t* ql = x.ql + 64 * j;
    const __m256i q4bits1 = loadu256(ql);
    const __m256i q4bits2 = loadu256(ql + 32);
    const __m256i q4bitsH = loadu256(x.qh + 32 * j);
    const __m256i q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, m2), 4);
    const __m256i q4h_1 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_slli_epi16(m2, 2)), 2);
    const __m256i q4h_2 = _mm256_and_si256(q4bitsH, _mm256_slli_epi16(m2, 4));
    const __m256i q4h_3 = _mm256_srli_epi16(_mm256_and_si256(q4bitsH, _mm256_slli_epi16(m2, 6)), 2);
    p.q[4 * j] = _mm256_or_si256(_mm256_and_si256(q4bits1, m4), q4h_0);
    p.q[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(q4bits2, m4), q4h_1);
    p.q[4 * j + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m4), q4h_2);
    p.q[4 * j + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m4), q4h_3);
    // This half's eight scales (int16) in both lanes; step k takes scale 2k on its low lane and
    // 2k + 1 on its high lane.
    const __m256i sc = j == 0 ? _mm256_permute4x64_epi64(p.scales16, 0x44) : _mm256_permute4x64_epi64(p.scales16, 0xEE);
    p.sc[4 * j] = split_i16(sc, 0, 1);
    p.sc[4 * j + 1] = split_i16(sc, 2, 3);
    p.sc[4 * j + 2] = split_i16(sc, 4, 5);
    p.sc[4 * j + 3] = split_i16(sc, 6, 7);
  }
  p.xd = fp16(x.d);
}

inline void acc_q6_k(const Q6KPrep& p, const BlockQ8_K& y, __m256& acc) {
  const float d = y.d * p.xd;
  const __m256i offset = _mm256_madd_epi16(p.scales16, loadu256(y.bsums));
  __m256i sumi = _mm256_setzero_si256();
  for (int k = 0; k < 8; k += 2) {
    const __m256i a = _mm256_madd_epi16(p.sc[k], _mm256_maddubs_epi16(p.q[k], loadu256(y.qs + 32 * k)));
    const __m256i b = _mm256_madd_epi16(p.sc[k + 1], _mm256_maddubs_epi16(p.q[k + 1], loadu256(y.qs + 32 * k + 32)));
    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(a, b));
  }
  sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

float dot_q4_k(int64_t nb, const BlockQ4_K* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  Q4KPrep p;
  for (int64_t i = 0; i < nb; ++i) {
    prep_q4_k(x[i], p);
    acc_q4_k(p, y[i], acc, acc_m);
  }
  return finish_q4_k(acc, acc_m);
}

float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  __m256 acc = _mm256_setzero_ps();
  Q6KPrep p;
  for (int64_t i = 0; i < nb; ++i) {
    prep_q6_k(x[i], p);
    acc_q6_k(p, y[i], acc);
  }
  return hsum(acc);
}

// One row against A activations: each block unpacked once (Q4_K and Q5_K through their Prep).
template <class Block, void (*Prep)(const Block&, Q4KPrep&)>
struct KRows {
  template <int A>
  struct Acts {
    static void run(int64_t nb, const Block* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
      __m256 acc[A];
      __m128 acc_m[A];
      for (int a = 0; a < A; ++a) {
        acc[a] = _mm256_setzero_ps();
        acc_m[a] = _mm_setzero_ps();
      }
      Q4KPrep p;
      for (int64_t i = 0; i < nb; ++i) {
        Prep(x[i], p);
        for (int a = 0; a < A; ++a) acc_q4_k(p, y[a][i], acc[a], acc_m[a]);
      }
      for (int a = 0; a < A; ++a) outs[a][r] = finish_q4_k(acc[a], acc_m[a]);
    }
  };
};

template <int A>
struct Q6KRowActs {
  static void run(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
    __m256 acc[A];
    for (int a = 0; a < A; ++a) acc[a] = _mm256_setzero_ps();
    Q6KPrep p;
    for (int64_t i = 0; i < nb; ++i) {
      prep_q6_k(x[i], p);
      for (int a = 0; a < A; ++a) acc_q6_k(p, y[a][i], acc[a]);
    }
    for (int a = 0; a < A; ++a) outs[a][r] = hsum(acc[a]);
  }
};

float dot_iq4_xs(int64_t nb, const BlockIQ4_XS* x, const BlockQ8_K* y) {
  // Two groups per step: their 32 code bytes as one 256-bit load (group g in the low lane, g+1 in
  // the high lane), looked up through the codebook once for the low and once for the high nibbles,
  // against the matching 16-value halves of the two groups' activations.
  const __m256i values = _mm256_broadcastsi128_si256(loadu128(quant::kIQ4NLValues));
  const __m256i m4 = _mm256_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    uint32_t sh = x[i].scales_h;
    __m256i sumi = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += 2) {
      const __m256i bits = loadu256(qs + 16 * g);
      const __m256i lo = _mm256_shuffle_epi8(values, _mm256_and_si256(bits, m4));
      const __m256i hi = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4));
      // Activations: elements 0..15 of both groups, then 16..31 of both.
      const __m256i ya = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q8 + 32 * g + 32),
                                             reinterpret_cast<const __m128i*>(q8 + 32 * g));
      const __m256i yb = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(q8 + 32 * g + 48),
                                             reinterpret_cast<const __m128i*>(q8 + 32 * g + 16));
      const int ls1 = ((x[i].scales_l[g / 2] & 0xF) | ((sh << 4) & 0x30)) - 32;
      const int ls2 = ((x[i].scales_l[g / 2] >> 4) | ((sh << 2) & 0x30)) - 32;
      sh >>= 4;
      const __m256i scale =
          _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(ls2)), _mm_set1_epi16(static_cast<short>(ls1)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(mul_add_epi8(lo, ya), scale));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(mul_add_epi8(hi, yb), scale));
    }
    const float d = fp16(x[i].d) * y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

}  // namespace

void dot_rows_q2_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ2_K, dot_q2_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ4_K, dot_q4_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ6_K, dot_q6_k>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ4_K, KRows<BlockQ4_K, prep_q4_k>::Acts, 4>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ5_K, KRows<BlockQ5_K, prep_q5_k>::Acts, 4>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ6_K, Q6KRowActs, 4>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq4_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ4_XS, dot_iq4_xs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx2
