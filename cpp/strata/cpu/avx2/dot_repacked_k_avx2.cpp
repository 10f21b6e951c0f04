// AVX2 kernels of the repacked Q2_K, Q3_K, Q4_K and Q6_K types (cpu/repack/layout.h). Q4_K_R16: a 16-row group as two
// halves of 8 rows, one 256-bit register per 4-column step whose 32-bit lane r is row r; the
// activation's 4 bytes of the step are broadcast once for both halves. Per sub-block, maddubs of
// the unsigned nibbles against them, the int16 pair sums of its eight steps added in int16
// (8 · 2 · 15 · 127 < 2^15), then one vpmaddwd by the row's 6-bit scale (duplicated into both
// int16 halves of the lane) gives scale · (exact sub-block sum) in int32; the mins meet the
// activation's pair sums in four vpmaddwd. Then sum += d·isum − dmin·summs with the multiplies and
// adds rounded separately (built with -ffp-contract=off): bitwise the plain Q4_K scalar dot.
// Q6_K_R16: the 6-bit quants rebuilt from ql / qh, maddubs per step, two steps added in int16
// (2 · 2 · 63 · 127 < 2^15), vpmaddwd by the sub-block's int8 scale; the −32 offset from the
// scale pairs against the activation's bsum pairs; sum += (dy·dx)·isum: bitwise the scalar Q6_K dot.
#include <algorithm>

#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/repacked_avx2.h"
#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"

namespace strata::cpu::avx2 {
namespace {

using quant::BlockQ8_K;
using L = repack::Q4KLayout;
using L6 = repack::Q6KLayout;

// One group (16 rows at grp) against A activations: outs[a][r0 .. r0 + n_valid). Each 32-byte load of
// quants is split into its nibbles, and each block's scales and mins unpacked, once for all A: a prefill
// chunk's or a verification window's rows share that work and the weights' reads. pf > 0: each super-block
// first prefetches its metadata's lines pf further on, then each step the quant line pf past its own
// (cpu/prefetch.h; the whole super-block's 36 lines at once kept fewer lines in flight: 12-14 GB/s from
// memory on a Zen 3 against 15-18). Per activation the operations and their order are the one-activation
// kernel's, so every output is bitwise the same.
struct Q4KGroup {  // for repack::k_rows / k_rows_multi
  template <int A>
  static void run(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0,
                  int n_valid, std::size_t pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[A][2];
    for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + L::block(b);
      if (pf != 0) prefetch_lines(blk + pf, L::kQs);
      alignas(32) uint8_t sc[128], mn[128];
      unpack6(blk + L::kScales, sc);
      unpack6(blk + L::kMins, mn);
      __m256i isum[A][2];
      for (int a = 0; a < A; ++a) isum[a][0] = isum[a][1] = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {  // sub-blocks 2j (low nibbles) and 2j + 1 (high nibbles)
        const uint8_t* qs = blk + L::kQs + 512 * j;
        __m256i plo[A][2], phi[A][2];
        for (int a = 0; a < A; ++a) plo[a][0] = plo[a][1] = phi[a][0] = phi[a][1] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          if (pf != 0) prefetch_lines(qs + 64 * s + pf, 64);
          __m256i bl[A], bh[A];
          for (int a = 0; a < A; ++a) {
            bl[a] = bcast_word(y[a][b].qs + 64 * j + 4 * s);
            bh[a] = bcast_word(y[a][b].qs + 64 * j + 32 + 4 * s);
          }
          for (int h = 0; h < 2; ++h) {
            const __m256i w = loadu256(qs + 64 * s + 32 * h);
            const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
            for (int a = 0; a < A; ++a) {
              plo[a][h] = _mm256_add_epi16(plo[a][h], _mm256_maddubs_epi16(lo, bl[a]));
              phi[a][h] = _mm256_add_epi16(phi[a][h], _mm256_maddubs_epi16(hi, bh[a]));
            }
          }
        }
        for (int h = 0; h < 2; ++h) {
          const __m256i slo = scales_dup(sc + 32 * j + 8 * h), shi = scales_dup(sc + 32 * j + 16 + 8 * h);
          for (int a = 0; a < A; ++a) {
            isum[a][h] = _mm256_add_epi32(isum[a][h], _mm256_madd_epi16(plo[a][h], slo));
            isum[a][h] = _mm256_add_epi32(isum[a][h], _mm256_madd_epi16(phi[a][h], shi));
          }
        }
      }
      for (int a = 0; a < A; ++a) {
        const BlockQ8_K& yb = y[a][b];
        const __m256i bs = loadu256(yb.bsums);
        alignas(16) int32_t pairs[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(pairs),
                        _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
        const __m256 yd = _mm256_set1_ps(yb.d);
        for (int h = 0; h < 2; ++h) {
          __m256i summs = _mm256_setzero_si256();
          for (int k = 0; k < 4; ++k) {
            const __m256i m =
                _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(mn + 32 * k + 16 * h)));
            summs = _mm256_add_epi32(summs, _mm256_madd_epi16(m, _mm256_set1_epi32(pairs[k])));
          }
          const __m256 d = _mm256_mul_ps(yd, _mm256_cvtph_ps(loadu128(blk + L::kD + 16 * h)));
          const __m256 dmin = _mm256_mul_ps(yd, _mm256_cvtph_ps(loadu128(blk + L::kDmin + 16 * h)));
          const __m256 t = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[a][h])),
                                         _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summs)));
          acc[a][h] = _mm256_add_ps(acc[a][h], t);
        }
      }
    }
    for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
  }
};

// One step's 6-bit quants rebuilt from its three 64-byte chunks at c3 (this half's 32 bytes of each; layout.h):
// q[p] holds, at 4·r + j, row r's quant of column 128h + 32p + 4s + j (ggml's order).
inline void q6_step(const uint8_t* c3, __m256i* q) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i la = loadu256(c3), lb = loadu256(c3 + 64), hc = loadu256(c3 + 128);
  q[0] = _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(hc, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(hc, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(hc, m30));
  q[3] =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hc, 2), m30));
}

// One Q6_K group against one activation: out[0 .. n_valid); pf as in Q4KGroup.
void group_q6(int64_t nb, const uint8_t* grp, const BlockQ8_K* y, float* out, int n_valid, std::size_t pf) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    // The bytes pf ahead a few lines at a time: a pair's metas (9 lines) at its first block, then the three
    // lines pf past each step's quants in the first half's pass (the one that reads them from memory).
    if (pf != 0 && (b & 1) == 0) prefetch_lines(grp + L6::pair(b) + pf, 2 * L6::kMetaBytes);
    const uint8_t* qs = grp + L6::qs_off(b, nb);
    const uint8_t* meta = grp + L6::meta_off(b, nb);
    const int8_t* q8 = y[b].qs;
    for (int hr = 0; hr < 2; ++hr) {  // rows 8hr .. 8hr + 7
      __m256i sp[8];                  // lane r: (scale 2k, scale 2k + 1) of row 8hr + r as int16
      __m256i off = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        sp[k] = _mm256_cvtepi8_epi16(loadu128(meta + L6::kScales + 32 * k + 16 * hr));
        off = _mm256_add_epi32(off, _mm256_madd_epi16(sp[k], bcast_word(y[b].bsums + 2 * k)));
      }
      __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
      for (int h = 0; h < 2; ++h) {
        for (int sh = 0; sh < 2; ++sh) {  // sub-blocks 8h + 2p + sh = 2k + sh (k = 4h + p): steps 4sh + t
          __m256i pr[4][2];               // [p][t / 2]: two steps' maddubs pairs added in int16
          for (int t = 0; t < 4; ++t) {
            const int s = 4 * sh + t;
            const uint8_t* c3 = qs + 192 * (8 * h + s) + 32 * hr;  // layout.h: chunks m = 0, 1, 2
            if (pf != 0 && hr == 0) prefetch_lines(c3 + pf, 192);
            __m256i q[4];
            q6_step(c3, q);
            for (int p = 0; p < 4; ++p) {
              const __m256i m = _mm256_maddubs_epi16(q[p], bcast_word(q8 + 128 * h + 32 * p + 4 * s));
              pr[p][t / 2] = (t % 2) ? _mm256_add_epi16(pr[p][t / 2], m) : m;
            }
          }
          for (int p = 0; p < 4; ++p) {
            // The scale of sub-block 2k + sh in both int16 halves of every lane.
            const __m256i v = sp[4 * h + p];
            const __m256i sc = half_dup(v, sh);
            isum = _mm256_add_epi32(isum,
                                    _mm256_add_epi32(_mm256_madd_epi16(pr[p][0], sc), _mm256_madd_epi16(pr[p][1], sc)));
          }
        }
      }
      const __m256 d = _mm256_mul_ps(_mm256_set1_ps(y[b].d), _mm256_cvtph_ps(loadu128(meta + 16 * hr)));
      acc[hr] = _mm256_add_ps(acc[hr], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum)));
    }
  }
  store_rows(acc[0], acc[1], out, n_valid);
}

// One Q6_K group against A >= 2 activations: outs[a][r0 .. r0 + n_valid); pf as in group_q6 (the first pass
// over the group only). The three 32-byte loads of a step and the 6-bit quants rebuilt from them are shared
// by the A activations, so a prefill chunk's or a window's second row costs its maddubs and sums only. Each
// activation's integer sum is group_q6's: the same products, and a sub-block's two step pairs meet the scale
// in two vpmaddwd added in int32, here one pair after the other (exact, so in any order); the float steps
// are group_q6's, so every output is bitwise the one-activation kernel's.
template <int A>
void group_q6_multi(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0,
                    int n_valid, std::size_t pf) {
  __m256 acc[A][2];
  for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (pf != 0 && (b & 1) == 0) prefetch_lines(grp + L6::pair(b) + pf, 2 * L6::kMetaBytes);
    const uint8_t* qs = grp + L6::qs_off(b, nb);
    const uint8_t* meta = grp + L6::meta_off(b, nb);
    for (int hr = 0; hr < 2; ++hr) {  // rows 8hr .. 8hr + 7
      // Lane r of scale_pair(k): (scale 2k, scale 2k + 1) of row 8hr + r as int16.
      auto scale_pair = [&](int k) { return _mm256_cvtepi8_epi16(loadu128(meta + L6::kScales + 32 * k + 16 * hr)); };
      __m256i isum[A];
      {
        __m256i off[A];
        for (int a = 0; a < A; ++a) off[a] = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
          const __m256i sp = scale_pair(k);
          for (int a = 0; a < A; ++a)
            off[a] = _mm256_add_epi32(off[a], _mm256_madd_epi16(sp, bcast_word(y[a][b].bsums + 2 * k)));
        }
        for (int a = 0; a < A; ++a) isum[a] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off[a], 5));
      }
      for (int h = 0; h < 2; ++h) {
        for (int sh = 0; sh < 2; ++sh) {    // sub-blocks 2k + sh (k = 4h + p): steps 4sh + t
          for (int tp = 0; tp < 2; ++tp) {  // steps t = 2tp, 2tp + 1: their maddubs pairs added in int16
            __m256i pr[A][4];
            for (int u = 0; u < 2; ++u) {
              const int s = 4 * sh + 2 * tp + u;
              const uint8_t* c3 = qs + 192 * (8 * h + s) + 32 * hr;  // layout.h: chunks m = 0, 1, 2
              if (pf != 0 && hr == 0) prefetch_lines(c3 + pf, 192);
              __m256i q[4];
              q6_step(c3, q);
              for (int p = 0; p < 4; ++p)
                for (int a = 0; a < A; ++a) {
                  const __m256i m = _mm256_maddubs_epi16(q[p], bcast_word(y[a][b].qs + 128 * h + 32 * p + 4 * s));
                  pr[a][p] = u == 0 ? m : _mm256_add_epi16(pr[a][p], m);
                }
            }
            for (int p = 0; p < 4; ++p) {
              // The scale of sub-block 2k + sh in both int16 halves of every lane.
              const __m256i sc = half_dup(scale_pair(4 * h + p), sh);
              for (int a = 0; a < A; ++a) isum[a] = _mm256_add_epi32(isum[a], _mm256_madd_epi16(pr[a][p], sc));
            }
          }
        }
      }
      const __m256 dx = _mm256_cvtph_ps(loadu128(meta + 16 * hr));
      for (int a = 0; a < A; ++a) {
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(y[a][b].d), dx);
        acc[a][hr] = _mm256_add_ps(acc[a][hr], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[a])));
      }
    }
  }
  for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
}

// Q6_K_R16 as a group type for repack::k_rows / k_rows_multi: one activation through group_q6, several
// through group_q6_multi.
struct Q6KGroup {
  template <int A>
  static void run(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0,
                  int n_valid, std::size_t pf) {
    if constexpr (A == 1)
      group_q6(nb, grp, y[0], outs[0] + r0, n_valid, pf);
    else
      group_q6_multi<A>(nb, grp, y, outs, r0, n_valid, pf);
  }
};

// One Q2_K group against A activations: outs[a][r0 .. r0 + n_valid). Per 8-row half, each 2-bit field
// shifted to bits 0-1 and masked once for all A, maddubs per step and activation, a sub-block's four steps
// added in int16 (4 · 2 · 3 · 128 < 2^15), vpmaddwd by its 4-bit scale in both int16 halves; the mins'
// nibbles against the activation's bsum pairs; then sum += (dy·dx)·isum − (dy·dmin)·summs: per activation
// bitwise the scalar Q2_K dot. pf: the metadata's lines pf ahead at the block's start, then each quant line
// in the first half's pass.
struct Q2KGroup {  // for repack::k_rows / k_rows_multi
  template <int A>
  static void run(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0,
                  int n_valid, std::size_t pf) {
    using L2 = repack::Q2KLayout;
    const __m256i m3 = _mm256_set1_epi8(0x03), m0F = _mm256_set1_epi16(0x0F);
    __m256 acc[A][2];
    for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = grp + L2::block(b);
      if (pf != 0) prefetch_lines(blk + pf, L2::kQs);
      const int8_t* q8[A];
      for (int a = 0; a < A; ++a) q8[a] = y[a][b].qs;
      for (int hr = 0; hr < 2; ++hr) {  // rows 8hr .. 8hr + 7
        __m256i isum[A];
        for (int a = 0; a < A; ++a) isum[a] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-blocks 8h + 2s + half
            __m256i pr[A][4];
            for (int tt = 0; tt < 4; ++tt) {
              const int t = 4 * half + tt;
              if (pf != 0 && hr == 0) prefetch_lines(blk + L2::kQs + 64 * (8 * h + t) + pf, 64);
              const __m256i w = loadu256(blk + L2::kQs + 64 * (8 * h + t) + 32 * hr);
              for (int s = 0; s < 4; ++s) {
                const __m256i q = _mm256_and_si256(s == 0 ? w : _mm256_srli_epi16(w, 2 * s), m3);
                for (int a = 0; a < A; ++a) {
                  const __m256i m = _mm256_maddubs_epi16(q, bcast_word(q8[a] + 128 * h + 32 * s + 4 * t));
                  pr[a][s] = tt == 0 ? m : _mm256_add_epi16(pr[a][s], m);
                }
              }
            }
            for (int s = 0; s < 4; ++s) {
              // Lane r: row 8hr + r's scale bytes 2k, 2k + 1 (k = 4h + s) as int16; sub-block 2k + half's
              // 4-bit scale in both int16 halves.
              const __m256i v =
                  _mm256_and_si256(_mm256_cvtepu8_epi16(loadu128(blk + L2::kScales + 32 * (4 * h + s) + 16 * hr)), m0F);
              const __m256i sc = half_dup(v, half);
              for (int a = 0; a < A; ++a) isum[a] = _mm256_add_epi32(isum[a], _mm256_madd_epi16(pr[a][s], sc));
            }
          }
        }
        __m256i summs[A];
        for (int a = 0; a < A; ++a) summs[a] = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
          const __m256i mins =
              _mm256_srli_epi16(_mm256_cvtepu8_epi16(loadu128(blk + L2::kScales + 32 * k + 16 * hr)), 4);
          for (int a = 0; a < A; ++a)
            summs[a] = _mm256_add_epi32(summs[a], _mm256_madd_epi16(mins, bcast_word(y[a][b].bsums + 2 * k)));
        }
        const __m256 dx = _mm256_cvtph_ps(loadu128(blk + L2::kD + 16 * hr));
        const __m256 dmx = _mm256_cvtph_ps(loadu128(blk + L2::kDmin + 16 * hr));
        for (int a = 0; a < A; ++a) {
          const __m256 yd = _mm256_set1_ps(y[a][b].d);
          const __m256 d = _mm256_mul_ps(yd, dx), dmin = _mm256_mul_ps(yd, dmx);
          const __m256 t = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[a])),
                                         _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summs[a])));
          acc[a][hr] = _mm256_add_ps(acc[a][hr], t);
        }
      }
    }
    for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
  }
};

// One Q3_K group against A activations: outs[a][r0 .. r0 + n_valid); pf: the whole block's bytes pf ahead at its
// start (the kernel computes at about the speed memory delivers, and per-step prefetches slowed it). Per 8-row half,
// each quant rebuilt as q3 + 4 (0..7: the qs field at bits 0-1, the hmask bit at bit 2) once for all A,
// maddubs per step and activation, a sub-block's four steps added in int16 (4 · 2 · 7 · 128 < 2^15) minus
// 4·bsum in the lane's low half (the −4 of every quant whose high bit is clear; ≥ −2^14), vpmaddwd by its
// signed scale in both int16 halves; then sum += (dx·dy)·isum: per activation bitwise the scalar Q3_K dot.
// Its loop has Q2KGroup's shape, written out in both: one helper taking the step's load, quant rebuild and
// scaling as lambdas kept the results but spilled the int16 sums (Q2_K_R16, one activation, Zen 3: 13-15
// -> 9-11 GB/s).
struct Q3KGroup {  // for repack::k_rows / k_rows_multi
  template <int A>
  static void run(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0,
                  int n_valid, std::size_t pf) {
    using L3 = repack::Q3KLayout;
    const __m256i m3 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x04);
    __m256 acc[A][2];
    for (int a = 0; a < A; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      if (pf != 0) prefetch_lines(grp + static_cast<std::size_t>(b) * L3::kBlockBytes + pf, L3::kBlockBytes);
      const uint8_t* qs = grp + L3::qs_off(b, nb);
      const uint8_t* meta = grp + L3::meta_off(b, nb);
      alignas(32) int8_t sc8[256];  // sc8[16·j + r] = scale j of row r (its 6-bit code − 32)
      unpack6<32>(meta + L3::kScales, sc8);
      unpack6<32>(meta + L3::kScales + 96, sc8 + 128);
      const int8_t* q8[A];
      const int16_t* bsums[A];
      for (int a = 0; a < A; ++a) {
        q8[a] = y[a][b].qs;
        bsums[a] = y[a][b].bsums;
      }
      for (int hr = 0; hr < 2; ++hr) {  // rows 8hr .. 8hr + 7
        __m256i isum[A];
        for (int a = 0; a < A; ++a) isum[a] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-blocks 8h + 2s + half
            __m256i pr[A][4];
            for (int tt = 0; tt < 4; ++tt) {
              const int t = 4 * half + tt;
              const __m256i qc = loadu256(qs + 64 * L3::qs_chunk(h, t) + 32 * hr);
              const __m256i hc = loadu256(qs + 64 * L3::hm_chunk(t) + 32 * hr);
              for (int s = 0; s < 4; ++s) {
                // 16-bit shifts by < 8 bring each byte's own bits to bits 0-1 / bit 2; the masks drop the rest.
                const int k = 4 * h + s;
                const __m256i low = _mm256_and_si256(s == 0 ? qc : _mm256_srli_epi16(qc, 2 * s), m3);
                const __m256i hb = k >= 2 ? _mm256_srli_epi16(hc, k - 2) : _mm256_slli_epi16(hc, 2 - k);
                const __m256i q = _mm256_or_si256(low, _mm256_and_si256(hb, m4));
                for (int a = 0; a < A; ++a) {
                  const __m256i m = _mm256_maddubs_epi16(q, bcast_word(q8[a] + 128 * h + 32 * s + 4 * t));
                  pr[a][s] = tt == 0 ? m : _mm256_add_epi16(pr[a][s], m);
                }
              }
            }
            for (int s = 0; s < 4; ++s) {
              const int j = 8 * h + 2 * s + half;
              const __m256i sc = scales_dup(sc8 + 16 * j + 8 * hr);
              for (int a = 0; a < A; ++a) {
                // −4·bsum in the low int16 of each lane only (a negative int32 would also set the high one).
                const __m256i p = _mm256_sub_epi16(pr[a][s], _mm256_set1_epi32((4 * bsums[a][j]) & 0xFFFF));
                isum[a] = _mm256_add_epi32(isum[a], _mm256_madd_epi16(p, sc));
              }
            }
          }
        }
        const __m256 dx = _mm256_cvtph_ps(loadu128(meta + 16 * hr));
        for (int a = 0; a < A; ++a) {
          const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(y[a][b].d));
          acc[a][hr] = _mm256_add_ps(acc[a][hr], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[a])));
        }
      }
    }
    for (int a = 0; a < A; ++a) store_rows(acc[a][0], acc[a][1], outs[a] + r0, n_valid);
  }
};

}  // namespace

void dot_rows_q3_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q3_K_R16, Q3KGroup>(n, w, stride, nrows, act, out);
}

// Passes of two activations: pr and isum take ten registers for two, beside the step's two loads and masks.
void dot_rows_multi_q3_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q3_K_R16, Q3KGroup, 2>(n, w, stride, nrows, acts, nact, outs);
}

void dot_rows_q2_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q2_K_R16, Q2KGroup>(n, w, stride, nrows, act, out);
}

// Passes of two activations: pr, isum and summs take twelve registers for two.
void dot_rows_multi_q2_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q2_K_R16, Q2KGroup, 2>(n, w, stride, nrows, acts, nact, outs);
}

void dot_rows_q4_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q4_K_R16, Q4KGroup>(n, w, stride, nrows, act, out);
}

// Passes of two activations: plo, phi and isum take six registers per activation, and AVX2 has 16.
void dot_rows_multi_q4_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q4_K_R16, Q4KGroup, 2>(n, w, stride, nrows, acts, nact, outs);
}

void dot_rows_q6_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q6_K_R16, Q6KGroup>(n, w, stride, nrows, act, out);
}

// Passes of two activations: pr and isum take ten registers for two, beside the step's three loads.
void dot_rows_multi_q6_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q6_K_R16, Q6KGroup, 2>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
