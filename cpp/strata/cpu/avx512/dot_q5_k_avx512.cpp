// AVX-512 dots of Q5_K with Q8_K activations: the Q4_K scheme of dot_k_avx512.cpp (unsigned weight
// bytes x signed activations through maddubs, the group scales applied by one VNNI vpdpwssd, the
// mins from the activation block sums) with each weight's fifth bit OR-ed into its nibble, 64 weights
// per instruction. Q5_K_M files (Q5_K experts) decoded through the AVX2 kernel at about half the read
// bandwidth, and prefilled at 0.4x llama.cpp with no multi-activation kernel at all. Integer parts are
// exact; only the f32 accumulation order differs from the scalar path.
#include <cstring>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/dot_rows.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockQ5_K;
using quant::BlockQ8_K;

// 256-bit half h of the result takes int16 lane a (h = 0) or b (h = 1).
inline __m512i halves_idx(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(a)), _mm256_set1_epi16(static_cast<short>(b)), 1);
}
// Every int16 lane of half 0 holds a, of half 1 b (per-half shift counts).
inline __m512i halves_count(int a, int b) { return halves_idx(a, b); }

inline float hsum128(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// A Q5_K super-block unpacked once (5-bit weights, scales spread per step, mins), then dotted against
// any number of activations: the single- and the multi-activation dots run the same two functions, so
// their results are bitwise equal.
struct Q5KPrep {
  __m512i lo[2], hi[2];        // 5-bit weights of chunks (j, j + 1), j = 0, 2: low / high nibbles
  __m512i sc_lo[2], sc_hi[2];  // their scales, one per 128-bit lane
  __m128i mins;                // the 8 mins as int16
  float xd, xdmin;
};

inline void prep_q5_k(const BlockQ5_K& x, Q5KPrep& p) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  const __m512i m4 = _mm512_set1_epi8(0xF);
  const __m512i m1 = _mm512_set1_epi8(1);
  // The 12 scale bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15), as Q4_K.
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
  const __m512i scales = _mm512_castsi256_si512(mins_and_scales);
  // qh byte l holds the fifth bits of byte l of every 32-byte chunk: bit 2j for chunk j's low
  // nibbles, bit 2j + 1 for its high nibbles. Both halves of the register see all 32 bytes.
  const __m512i hbits = _mm512_broadcast_i64x4(loadu256(x.qh));
  for (int h = 0; h < 2; ++h) {  // 32-byte chunks 2h and 2h + 1: sub-blocks 4h .. 4h + 3
    const int j = 2 * h;
    const __m512i q4bits = loadu512(x.qs + 32 * j);
    // 16-bit shifts by < 8 keep each byte's bits in that byte: bit k of byte l lands in bit 0.
    const __m512i b_lo = _mm512_and_si512(_mm512_srlv_epi16(hbits, halves_count(2 * j, 2 * j + 2)), m1);
    const __m512i b_hi = _mm512_and_si512(_mm512_srlv_epi16(hbits, halves_count(2 * j + 1, 2 * j + 3)), m1);
    p.lo[h] = _mm512_or_si512(_mm512_and_si512(q4bits, m4), _mm512_slli_epi16(b_lo, 4));
    p.hi[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q4bits, 4), m4), _mm512_slli_epi16(b_hi, 4));
    p.sc_lo[h] = _mm512_permutexvar_epi16(halves_idx(2 * j, 2 * j + 2), scales);
    p.sc_hi[h] = _mm512_permutexvar_epi16(halves_idx(2 * j + 1, 2 * j + 3), scales);
  }
  p.xd = fp16(x.d);
  p.xdmin = fp16(x.dmin);
}

// One Q8_K activation block in the registers acc_q5_k reads: loaded once, shared by every weight row.
struct Q8KView {
  __m512i lo[2], hi[2];  // activations matching Q5KPrep::lo / hi
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

inline void acc_q5_k(const Q5KPrep& p, const Q8KView& v, __m512& acc, __m128& acc_m) {
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

// One activation against nrows rows: the activation's views built once for the whole call (rows up
// to kViewBlocks super-blocks long), each row streamed in order.
constexpr int64_t kViewBlocks = 32;

void q5_k_rows_one_act(int64_t nb, const uint8_t* x, std::size_t stride, int64_t nrows, const BlockQ8_K* y,
                       float* out) {
  Q8KView v[kViewBlocks];
  const bool held = nb <= kViewBlocks;  // else (long rows) a view per block as it comes, in v[0]
  if (held)
    for (int64_t i = 0; i < nb; ++i) view_q8_k(y[i], v[i]);
  Q5KPrep p;
  for (int64_t r = 0; r < nrows; ++r) {
    const auto* xr = reinterpret_cast<const BlockQ5_K*>(x + static_cast<std::size_t>(r) * stride);
    __m512 acc = _mm512_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      if (!held) view_q8_k(y[i], v[0]);
      prep_q5_k(xr[i], p);
      acc_q5_k(p, v[held ? i : 0], acc, acc_m);
    }
    out[r] = hsum(acc) + hsum128(acc_m);
  }
}

// One row against A activations (up to eight: their accumulators and a prepared block fit the 32
// registers): each block unpacked once.
template <int A>
struct Q5KRowActs {
  static void run(int64_t nb, const BlockQ5_K* x, const BlockQ8_K* const* y, float* const* outs, int64_t r) {
    __m512 acc[A];
    __m128 acc_m[A];
    for (int a = 0; a < A; ++a) {
      acc[a] = _mm512_setzero_ps();
      acc_m[a] = _mm_setzero_ps();
    }
    Q5KPrep p;
    Q8KView v;
    for (int64_t i = 0; i < nb; ++i) {
      prep_q5_k(x[i], p);
      for (int a = 0; a < A; ++a) {
        view_q8_k(y[a][i], v);
        acc_q5_k(p, v, acc[a], acc_m[a]);
      }
    }
    for (int a = 0; a < A; ++a) outs[a][r] = hsum(acc[a]) + hsum128(acc_m[a]);
  }
};

}  // namespace

void dot_rows_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  q5_k_rows_one_act(n / quant::kQK_K, static_cast<const uint8_t*>(w), stride, nrows, static_cast<const BlockQ8_K*>(act),
                    out);
}
void dot_rows_multi_q5_k(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                         float* const* outs) {
  rows_multi_q8_k<BlockQ5_K, Q5KRowActs, 8>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx512
