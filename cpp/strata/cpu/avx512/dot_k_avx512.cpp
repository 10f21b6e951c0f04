// AVX-512 dots of the 256-value super-block formats (Q2_K, Q4_K, Q5_K, Q6_K, IQ4_XS) with Q8_K
// activations. The AVX2 scheme (cpu/avx2/dot_k_avx2.cpp) on 64 weights per instruction: unsigned
// weight bytes x signed activations through maddubs into int16 pairs, then the group scales
// applied and accumulated in int32 by one VNNI vpdpwssd (madd + add fused). Each 128-bit lane of a
// 512-bit product belongs to one scale group, so the scales are spread with one vpermw. The min
// terms come from the activation block sums as in AVX2. IQ4_XS: four groups per codebook lookup,
// the sign moved onto the activations (AVX-512 has no vpsignb). Q5_K: Q4_K with the fifth bits
// merged while unpacking (prep_q5_k), the rest shared. Integer parts are exact; only the f32
// accumulation order differs from the scalar path.
#include <cstring>

#include "strata/cpu/dot_rows.h"
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// vpermw indices: 128-bit lane l of the result takes int16 lane (base + l) of the source.
inline __m512i lanes_idx(int base) {
  const __m256i lo =
      _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(base + 1)), _mm_set1_epi16(static_cast<short>(base)));
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

// A Q4_K or Q5_K super-block unpacked once (quants, scales spread per step, mins), then dotted against
// any number of activations: the single- and the multi-activation dots run the same two functions, so
// their results are bitwise equal.
struct Q4KPrep {
  __m512i lo[2], hi[2];        // weight quants of chunks (j, j + 1), j = 0, 2: low / high nibbles
  __m512i sc_lo[2], sc_hi[2];  // their scales, one per 128-bit lane
  __m128i mins;                // the 8 mins as int16
  float xd, xdmin;
};

// Q4_K / Q5_K's 12 scale bytes -> p.mins, p.xd, p.xdmin and the 8 scales as int16 lanes 0..7.
template <class Block>
inline __m512i prep_scales(const Block& x, Q4KPrep& p) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  // The 12 scale bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15).
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
  return _mm512_castsi256_si512(mins_and_scales);
}

inline void prep_q4_k(const BlockQ4_K& x, Q4KPrep& p) {
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m512i scales = prep_scales(x, p);
  for (int h = 0; h < 2; ++h) {  // 32-byte chunks 2h and 2h + 1: sub-blocks 4h .. 4h + 3
    const int j = 2 * h;
    const __m512i q4bits = loadu512(x.qs + 32 * j);
    p.lo[h] = _mm512_and_si512(q4bits, m4);
    p.hi[h] = _mm512_and_si512(_mm512_srli_epi16(q4bits, 4), m4);
    p.sc_lo[h] = _mm512_permutexvar_epi16(halves_idx(2 * j, 2 * j + 2), scales);
    p.sc_hi[h] = _mm512_permutexvar_epi16(halves_idx(2 * j + 1, 2 * j + 3), scales);
  }
}

// Q5_K: Q4_K with each weight's fifth bit OR-ed into its nibble. qh byte l holds the fifth bits of
// byte l of every 32-byte chunk: bit 2j for chunk j's low nibbles, bit 2j + 1 for its high ones;
// both halves of the register see all 32 bytes, each half shifted by its own chunk's count.
inline void prep_q5_k(const BlockQ5_K& x, Q4KPrep& p) {
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m512i m1 = _mm512_set1_epi8(1);
  const __m512i scales = prep_scales(x, p);
  const __m512i hbits = _mm512_broadcast_i64x4(loadu256(x.qh));
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * h;
    const __m512i q4bits = loadu512(x.qs + 32 * j);
    // 16-bit shifts by < 8 keep each byte's bits in that byte: bit k of byte l lands in bit 0.
    const __m512i b_lo = _mm512_and_si512(_mm512_srlv_epi16(hbits, halves_idx(2 * j, 2 * j + 2)), m1);
    const __m512i b_hi = _mm512_and_si512(_mm512_srlv_epi16(hbits, halves_idx(2 * j + 1, 2 * j + 3)), m1);
    p.lo[h] = _mm512_or_si512(_mm512_and_si512(q4bits, m4), _mm512_slli_epi16(b_lo, 4));
    p.hi[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q4bits, 4), m4), _mm512_slli_epi16(b_hi, 4));
    p.sc_lo[h] = _mm512_permutexvar_epi16(halves_idx(2 * j, 2 * j + 2), scales);
    p.sc_hi[h] = _mm512_permutexvar_epi16(halves_idx(2 * j + 1, 2 * j + 3), scales);
  }
}

// One Q8_K activation block in the registers acc_q4_k reads: loaded once, shared by every weight row
// of a decode step's row group.
struct Q8KView {
  __m512i lo[2], hi[2];  // activations matching Q4KPrep::lo / hi
  __m128i q8s;           // the 8 sub-block sums (pairs of bsums)
  float yd;
};

inline void view_q8_k(const BlockQ8_K& y, Q8KView& v) {
  const __m256i q8sums = loadu256(y.bsums);
  v.q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
  const int8_t* q8 = y.qs;
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * h;
    v.lo[h] = load2x256(q8 + 64 * j, q8 + 64 * j + 64);
    v.hi[h] = load2x256(q8 + 64 * j + 32, q8 + 64 * j + 96);
  }
  v.yd = y.d;
}

inline void acc_q4_k(const Q4KPrep& p, const Q8KView& v, __m512& acc, __m128& acc_m) {
  const float d = v.yd * p.xd;
  const float dmin = -v.yd * p.xdmin;
  const __m128i prod = _mm_madd_epi16(p.mins, v.q8s);
  acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
  __m512i sumi = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(p.lo[h], v.lo[h]), p.sc_lo[h]);
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(p.hi[h], v.hi[h]), p.sc_hi[h]);
  }
  acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
}

// A Q6_K super-block unpacked once: the 6-bit weights of its four 64-byte chunks, their scales spread
// per step, and the int16 scales for the −32 offset (Σ sc·(q − 32)·a = Σ sc·q·a − 32·Σ sc·bsum).
struct Q6KPrep {
  __m512i q[4];   // chunks (0, 1), (2, 3) of each half
  __m512i sc[4];  // their scales, one per 128-bit lane
  __m256i scales16;
  float xd;
};

inline void prep_q6_k(const BlockQ6_K& x, Q6KPrep& p) {
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i shift01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i shift23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
  p.scales16 = _mm256_cvtepi8_epi16(loadu128(x.scales));
  const __m512i scales = _mm512_castsi256_si512(p.scales16);
  for (int j = 0; j < 2; ++j) {
    const __m512i lbits = loadu512(x.ql + 64 * j);
    const __m512i hbits = _mm512_broadcast_i64x4(loadu256(x.qh + 32 * j));
    const __m512i ha = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hbits, shift01), m3), 4);
    const __m512i hb = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hbits, shift23), m3), 4);
    p.q[2 * j] = _mm512_or_si512(_mm512_and_si512(lbits, m4), ha);                            // chunks 0, 1
    p.q[2 * j + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lbits, 4), m4), hb);  // chunks 2, 3
    p.sc[2 * j] = _mm512_permutexvar_epi16(lanes_idx(8 * j), scales);
    p.sc[2 * j + 1] = _mm512_permutexvar_epi16(lanes_idx(8 * j + 4), scales);
  }
  p.xd = fp16(x.d);
}

inline void acc_q6_k(const Q6KPrep& p, const BlockQ8_K& y, __m512& acc) {
  const float d = y.d * p.xd;
  const __m256i offset = _mm256_madd_epi16(p.scales16, loadu256(y.bsums));
  const int8_t* q8 = y.qs;
  __m512i sumi = _mm512_setzero_si512();
  for (int j = 0; j < 2; ++j) {
    const __m512i pa = _mm512_maddubs_epi16(p.q[2 * j], loadu512(q8 + 128 * j));
    const __m512i pb = _mm512_maddubs_epi16(p.q[2 * j + 1], loadu512(q8 + 128 * j + 64));
    sumi = _mm512_dpwssd_epi32(sumi, pa, p.sc[2 * j]);
    sumi = _mm512_dpwssd_epi32(sumi, pb, p.sc[2 * j + 1]);
  }
  sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
  acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
}

// Rows against one activation (decode): the activation's blocks are unpacked into views once per
// call (rows of up to kViewBlocks blocks; longer rows unpack a view per block), and every row then
// streams its own blocks in order (interleaving rows block by block defeats the hardware
// prefetcher: measured at half the read speed).
constexpr int64_t kViewBlocks = 32;

template <class Block, void (*Prep)(const Block&, Q4KPrep&)>
void k_rows_one_act(int64_t nb, const uint8_t* x, std::size_t stride, int64_t nrows, const BlockQ8_K* y, float* out) {
  Q8KView v[kViewBlocks];
  const bool held = nb <= kViewBlocks;  // else (long rows) a view per block as it comes, in v[0]
  if (held)
    for (int64_t i = 0; i < nb; ++i) view_q8_k(y[i], v[i]);
  Q4KPrep p;
  for (int64_t r = 0; r < nrows; ++r) {
    const auto* xr = reinterpret_cast<const Block*>(x + static_cast<std::size_t>(r) * stride);
    __m512 acc = _mm512_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      if (!held) view_q8_k(y[i], v[0]);
      Prep(xr[i], p);
      acc_q4_k(p, v[held ? i : 0], acc, acc_m);
    }
    out[r] = hsum(acc) + hsum128(acc_m);
  }
}

float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  __m512 acc = _mm512_setzero_ps();
  Q6KPrep p;
  for (int64_t i = 0; i < nb; ++i) {
    prep_q6_k(x[i], p);
    acc_q6_k(p, y[i], acc);
  }
  return hsum(acc);
}

// One row against A activations: each block unpacked once. Up to eight activations per pass
// (eight accumulators and a prepared block fit the 32 registers; prefill of the Q4_K_M model +4-10 %).
template <class Block, void (*Prep)(const Block&, Q4KPrep&)>
struct KRows {
  template <int A>
  struct Acts {
    static void run(int64_t nb, const Block* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
      __m512 acc[A];
      __m128 acc_m[A];
      for (int a = 0; a < A; ++a) {
        acc[a] = _mm512_setzero_ps();
        acc_m[a] = _mm_setzero_ps();
      }
      Q4KPrep p;
      Q8KView v;
      for (int64_t i = 0; i < nb; ++i) {
        Prep(x[i], p);
        for (int a = 0; a < A; ++a) {
          view_q8_k(y[a][i], v);
          acc_q4_k(p, v, acc[a], acc_m[a]);
        }
      }
      for (int a = 0; a < A; ++a) outs[a][r] = hsum(acc[a]) + hsum128(acc_m[a]);
    }
  };
};

template <int A>
struct Q6KRowActs {
  static void run(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
    __m512 acc[A];
    for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
    Q6KPrep p;
    for (int64_t i = 0; i < nb; ++i) {
      prep_q6_k(x[i], p);
      for (int a = 0; a < A; ++a) acc_q6_k(p, y[a][i], acc[a]);
    }
    for (int a = 0; a < A; ++a) outs[a][r] = hsum(acc[a]);
  }
};

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
      ls[g] = static_cast<int16_t>(
          (((x[i].scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((x[i].scales_h >> (2 * g)) & 3) << 4)) - 32);
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

}  // namespace

void dot_rows_q2_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ2_K, dot_q2_k>(n, w, stride, nrows, act, out);
}
void dot_rows_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  k_rows_one_act<BlockQ4_K, prep_q4_k>(nb, p, stride, nrows, y, out);
}
void dot_rows_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  k_rows_one_act<BlockQ5_K, prep_q5_k>(n / quant::kQK_K, static_cast<const uint8_t*>(w), stride, nrows,
                                       static_cast<const BlockQ8_K*>(act), out);
}
void dot_rows_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockQ6_K, dot_q6_k>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ4_K, KRows<BlockQ4_K, prep_q4_k>::Acts, 8>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ5_K, KRows<BlockQ5_K, prep_q5_k>::Acts, 8>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q6_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ6_K, Q6KRowActs, 8>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq4_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows_q8_k<BlockIQ4_XS, dot_iq4_xs>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx512
