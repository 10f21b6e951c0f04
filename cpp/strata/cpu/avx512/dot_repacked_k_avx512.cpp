// AVX-512 VNNI kernels of the repacked Q2_K, Q3_K, Q4_K, Q5_K and Q6_K types (cpu/repack/layout.h). Q4_K_R16: 16 rows
// per group, one 512-bit register per 4-column step whose 32-bit lane r is row r. Per sub-block of 32 columns, eight
// vpdpbusd (the nibbles unsigned, the activation's 4 bytes of the step broadcast) give every row's exact integer sum;
// one vpmulld by the row's 6-bit scale (unpacked from the layout once per super-block for all 16 rows, no per-row
// decode of Q4_K's 12-byte packing) adds it to the super-block sum; the mins meet the activation's pair sums in four
// vpdpwssd. Then, per row, sum += d·isum − dmin·summs with every multiply and add rounded separately (built with
// -ffp-contract=off): the scalar kernel's arithmetic, so results are bitwise the plain Q4_K scalar
// dot. A GEMV walks one row group at a time (one sequential read, as the other repacked kernels);
// with several activations each group's unpacked quants are shared by up to four of them.
// Q6_K_R16: the 6-bit quants (0..63, unsigned) are rebuilt from the interleaved ql / qh in 512-bit
// steps (a masked qh pair, one 16-bit shift and one vpternlogd select per 64 quants; one quant of
// four as 4·q, its chain shifted back per sub-block) and go through vpdpbusd the same way, one
// vpmulld per 16-column sub-block by its int8 scale; the −32 offset is 32·Σ scale·bsum, eight
// vpdpwssd of the scale pairs against the activation's bsum pairs; then sum += (dy·dx)·isum, the
// scalar kernel's arithmetic. Why each step's quants go straight into the chains and the scales
// are copied first: docs/quantization.md (Q6_K_R16).
#include <algorithm>
#include <type_traits>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/prefetch.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockQ8_K;
using L = repack::Q4KLayout;
using L6 = repack::Q6KLayout;

// The 128 6-bit values packed at p (layout.h) as two registers of 64 bytes: u[0] = U[0..64), u[1] = U[64..128).
inline void unpack6(const uint8_t* p, __m512i* u) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
  const __m512i lo = loadu512(p);
  const __m512i hi = _mm512_broadcast_i64x4(loadu256(p + 64));
  const __m512i h0 = _mm512_srlv_epi64(hi, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
  const __m512i h1 = _mm512_srlv_epi64(hi, _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6));
  u[0] = _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_slli_epi16(_mm512_and_si512(h0, m2), 4));
  u[1] =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4), _mm512_slli_epi16(_mm512_and_si512(h1, m2), 4));
}

// c ? a : b in every bit: one vpternlogd (truth-table columns a = 0xF0, b = 0xCC, c = 0xAA).
inline __m512i select_bits(__m512i c, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(a, b, c, 0xE4); }

// One group (16 rows at grp) against A activations: outs[a][r0 .. r0 + n_valid).
// pf > 0: each super-block first prefetches the group's bytes pf further on (cpu/prefetch.h).
// Q5: a Q5_K_R16 group (layout.h): step s of sub-block pair j also reads qh chunk s; shifted right by
// 2j, its bit 0 belongs to the low nibbles and bit 1 to the high ones, each moved to bit 4 and merged
// under its nibble by one vpternlogd. The 5-bit quants (0..31) then take the Q4_K path, and per row
// sum += d·isum − dmin·summs is the scalar Q5_K dot's arithmetic (bitwise).
template <int A, bool Q5 = false>
void group(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid,
           std::size_t pf = 0) {
  using Lk = std::conditional_t<Q5, repack::Q5KLayout, L>;
  const __m512i m4 = _mm512_set1_epi8(0x0F), h4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m512i m1 = _mm512_set1_epi8(0x01), m2 = _mm512_set1_epi8(0x02);
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + Lk::block(b);
    if (pf != 0) prefetch_lines(blk + pf, Lk::kBlockBytes);
    alignas(64) uint8_t sc[128], mn[128];
    __m512i u[2];
    unpack6(blk + Lk::kScales, u);
    _mm512_store_si512(sc, u[0]);
    _mm512_store_si512(sc + 64, u[1]);
    unpack6(blk + Lk::kMins, u);
    _mm512_store_si512(mn, u[0]);
    _mm512_store_si512(mn + 64, u[1]);

    __m512i isum[A];
    for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {  // sub-blocks 2j (low nibbles) and 2j + 1 (high nibbles)
      const uint8_t* qs = blk + Lk::kQs + 512 * j;
      __m512i lo[8], hi[8];
      for (int s = 0; s < 8; ++s) {
        const __m512i w = loadu512(qs + 64 * s);
        if constexpr (Q5) {
          // 16-bit shifts by < 8 keep every byte's bits in that byte.
          const __m512i t = _mm512_srli_epi16(loadu512(blk + Lk::kQh + 64 * s), static_cast<unsigned>(2 * j));
          lo[s] = select_bits(m4, w, _mm512_slli_epi16(_mm512_and_si512(t, m1), 4));
          hi[s] = select_bits(m4, _mm512_srli_epi16(w, 4), _mm512_slli_epi16(_mm512_and_si512(t, m2), 3));
        } else {
          lo[s] = _mm512_and_si512(w, m4);
          hi[s] = _mm512_and_si512(w, h4);  // 16 × the high nibble: its chains are shifted back below
        }
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 32 * j)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 32 * j + 16)));
      for (int a = 0; a < A; ++a) {
        const int8_t* q8 = y[a][b].qs + 64 * j;
        // Four independent vpdpbusd chains (even / odd steps of each sub-block): integer sums, so
        // the order changes nothing.
        __m512i p0 = _mm512_setzero_si512(), p1 = p0, q0 = p0, q1 = p0;
        for (int s = 0; s < 8; s += 2) {
          p0 = dpbusd_bcast(p0, lo[s], q8 + 4 * s);
          p1 = dpbusd_bcast(p1, lo[s + 1], q8 + 4 * s + 4);
          q0 = dpbusd_bcast(q0, hi[s], q8 + 32 + 4 * s);
          q1 = dpbusd_bcast(q1, hi[s + 1], q8 + 32 + 4 * s + 4);
        }
        // Q4: q0 + q1 is 16× the high sub-block's sum (|16·15·127·32| fits int32; vpdpbusd does not
        // saturate), so one arithmetic shift returns it exactly.
        const __m512i qsum = Q5 ? _mm512_add_epi32(q0, q1) : _mm512_srai_epi32(_mm512_add_epi32(q0, q1), 4);
        const __m512i t =
            _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(p0, p1), sc_lo), _mm512_mullo_epi32(qsum, sc_hi));
        isum[a] = _mm512_add_epi32(isum[a], t);
      }
    }
    __m512i mins[4];  // lane r: (min 2k, min 2k + 1) of row r as int16
    for (int k = 0; k < 4; ++k)
      mins[k] = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(mn + 32 * k)));
    const __m512 xd = _mm512_cvtph_ps(loadu256(blk + Lk::kD));
    const __m512 xdmin = _mm512_cvtph_ps(loadu256(blk + Lk::kDmin));
    for (int a = 0; a < A; ++a) {
      const BlockQ8_K& yb = y[a][b];
      // The activation's 8 sub-block sums (pairs of its 16-value bsums), as 4 int16 pairs.
      const __m256i bs = loadu256(yb.bsums);
      alignas(16) int32_t pairs[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(pairs),
                      _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
      __m512i summs = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) summs = _mm512_dpwssd_epi32(summs, mins[k], _mm512_set1_epi32(pairs[k]));
      const __m512 yd = _mm512_set1_ps(yb.d);
      const __m512 d = _mm512_mul_ps(yd, xd);
      const __m512 dmin = _mm512_mul_ps(yd, xdmin);
      const __m512 t =
          _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[a])), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summs)));
      acc[a] = _mm512_add_ps(acc[a], t);
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

// One Q6_K group against A activations.
template <int A>
void group_q6(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid,
              std::size_t pf = 0) {
  const __m512i m0F = _mm512_set1_epi8(0x0F), m3C = _mm512_set1_epi8(0x3C);
  const __m512i m33 = _mm512_set1_epi8(0x33), mCC = _mm512_set1_epi8(static_cast<char>(0xCC));
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    // The group's blocks are contiguous, all kBlockBytes long: block b's share of the bytes pf ahead.
    if (pf != 0) prefetch_lines(grp + static_cast<std::size_t>(b) * L6::kBlockBytes + pf, L6::kBlockBytes);
    const uint8_t* qs = grp + L6::qs_off(b, nb);
    const uint8_t* meta = grp + L6::meta_off(b, nb);
    // The scales and d are read before the quants: reading the scales from the meta between the
    // quants' loads (a jump back of up to 3 KiB, four times per block) halved the speed of a matrix
    // streamed from memory, so they are copied here.
    alignas(64) uint8_t scales[256];
    for (int i = 0; i < 4; ++i) _mm512_store_si512(scales + 64 * i, loadu512(meta + L6::kScales + 64 * i));
    const __m512 xd = _mm512_cvtph_ps(loadu256(meta));
    __m512i isum[A];
    for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 2; ++sh) {  // steps 4sh .. 4sh + 3: sub-blocks 8h + 2p + sh, p = 0..3
        // One vpdpbusd chain per (activation, p); each step's unpacked quants go straight into them,
        // so the chains start while the next step is unpacked.
        __m512i s4[A][4];
        for (int a = 0; a < A; ++a)
          for (int p = 0; p < 4; ++p) s4[a][p] = _mm512_setzero_si512();
        for (int t = 0; t < 4; ++t) {
          const int s = 4 * sh + t;
          const uint8_t* c3 = qs + 192 * (8 * h + s);  // layout.h: chunks m = 0, 1, 2 of (h, s)
          const __m512i la = loadu512(c3), lb = loadu512(c3 + 64), hc = loadu512(c3 + 128);
          // Each quant is a nibble (la / lb, low or high) below its 2 top bits (hc, bits 2p .. 2p + 1).
          // 16-bit shifts move bits across the bytes of a word, so the top bits are first masked
          // in pairs (h02: p = 0, 2; h13: p = 1, 3) and every bit a select takes from a shifted word is
          // either a wanted bit or a masked zero: two ops per 64 quants, one shift and one vpternlogd.
          const __m512i h02 = _mm512_and_si512(hc, m33), h13 = _mm512_and_si512(hc, mCC);
          __m512i q[4];
          q[0] = select_bits(m0F, la, _mm512_slli_epi16(h02, 4));
          q[1] = select_bits(m0F, lb, _mm512_slli_epi16(h13, 2));
          q[2] = select_bits(m0F, _mm512_srli_epi16(la, 4), h02);
          // p = 3 as 4·q (at most 252, still a byte): the nibble shifted to bits 2-5 under the top bits
          // where they are (6-7); its sum is shifted back once per sub-block below.
          q[3] = select_bits(m3C, _mm512_srli_epi16(lb, 2), h13);
          for (int a = 0; a < A; ++a) {
            const int8_t* q8 = y[a][b].qs + 128 * h + 16 * sh + 4 * t;
            for (int p = 0; p < 4; ++p) s4[a][p] = dpbusd_bcast(s4[a][p], q[p], q8 + 32 * p);
          }
        }
        for (int p = 0; p < 4; ++p) {
          // Sub-block 8h + 2p + sh = 2k + sh (k = 4h + p): lane r's int16 word holds row r's scales
          // 2k (low byte) and 2k + 1 (high byte); its int8 scale sign-extended to int32.
          const __m512i w = _mm512_cvtepi16_epi32(loadu256(scales + 32 * (4 * h + p)));
          const __m512i sc = sh == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(w, 24), 24) : _mm512_srai_epi32(w, 8);
          for (int a = 0; a < A; ++a) {
            // s4[a][3] is 4 × the sub-block's sum (|4·63·128·16| fits int32, vpdpbusd does not
            // saturate): the arithmetic shift returns it exactly.
            const __m512i sum = p == 3 ? _mm512_srai_epi32(s4[a][p], 2) : s4[a][p];
            isum[a] = _mm512_add_epi32(isum[a], _mm512_mullo_epi32(sum, sc));
          }
        }
      }
    }
    // The −32 offsets: each scale pair widened once per block for all the activations.
    __m512i off[A];
    for (int a = 0; a < A; ++a) off[a] = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      const __m512i sp = _mm512_cvtepi8_epi16(loadu256(scales + 32 * k));  // lane r: row r's scales 2k, 2k + 1
      for (int a = 0; a < A; ++a) off[a] = _mm512_dpwssd_epi32(off[a], sp, bcast_word(y[a][b].bsums + 2 * k));
    }
    for (int a = 0; a < A; ++a) {
      const BlockQ8_K& yb = y[a][b];
      const __m512i is = _mm512_sub_epi32(isum[a], _mm512_slli_epi32(off[a], 5));
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(yb.d), xd);
      acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(d, _mm512_cvtepi32_ps(is)));
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

// One Q3_K group against A activations (layout.h, Q3_K_R16). Each quant is rebuilt as q3 + 4 (0..7,
// unsigned): its 2-bit field of the qs chunk shifted to bits 0-1, the hmask bit 4h + s shifted to bit 2,
// merged by one vpternlogd; per 16-column sub-block the vpdpbusd chain, started at −4·bsum, is the exact
// sum of q3·y (q3 = low − 4 when the high bit is clear), times the row's scale (vpmulld). Then per row
// sum += (dx·dy)·isum: the scalar Q3_K dot's arithmetic, so results are bitwise the plain kernel's.
template <int A>
void group_q3(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid,
              std::size_t pf = 0) {
  using L3 = repack::Q3KLayout;
  const __m512i m3 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x04), c32 = _mm512_set1_epi8(32);
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (pf != 0) prefetch_lines(grp + static_cast<std::size_t>(b) * L3::kBlockBytes + pf, L3::kBlockBytes);
    const uint8_t* qs = grp + L3::qs_off(b, nb);
    const uint8_t* meta = grp + L3::meta_off(b, nb);
    alignas(64) int8_t sc[256];  // sc[16·j + r] = scale j of row r (its 6-bit code − 32)
    __m512i u[2];
    for (int k = 0; k < 2; ++k) {
      unpack6(meta + L3::kScales + 96 * k, u);
      _mm512_store_si512(sc + 128 * k, _mm512_sub_epi8(u[0], c32));
      _mm512_store_si512(sc + 128 * k + 64, _mm512_sub_epi8(u[1], c32));
    }
    const __m512 xd = _mm512_cvtph_ps(loadu256(meta));
    __m512i isum[A];
    for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-blocks 8h + 2s + half
        // The chain of sub-block j starts at −4·bsum_j: the −4 of every quant whose high bit is clear.
        __m512i s4[A][4];
        for (int a = 0; a < A; ++a)
          for (int s = 0; s < 4; ++s) s4[a][s] = _mm512_set1_epi32(-4 * y[a][b].bsums[8 * h + 2 * s + half]);
        for (int tt = 0; tt < 4; ++tt) {
          const int t = 4 * half + tt;
          const __m512i qc = loadu512(qs + 64 * L3::qs_chunk(h, t));
          const __m512i hc = loadu512(qs + 64 * L3::hm_chunk(t));
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
            // 16-bit shifts by < 8 bring each byte's own bit to bits 0-1 / bit 2; the masks drop the rest.
            const int k = 4 * h + s;
            const __m512i low = s == 0 ? qc : _mm512_srli_epi16(qc, static_cast<unsigned>(2 * s));
            const __m512i hb = k >= 2 ? _mm512_srli_epi16(hc, static_cast<unsigned>(k - 2))
                                      : _mm512_slli_epi16(hc, static_cast<unsigned>(2 - k));
            const __m512i q = select_bits(m3, low, _mm512_and_si512(hb, m4));
            for (int a = 0; a < A; ++a) s4[a][s] = dpbusd_bcast(s4[a][s], q, y[a][b].qs + 128 * h + 32 * s + 4 * t);
          }
        }
        for (int s = 0; s < 4; ++s) {
          const int j = 8 * h + 2 * s + half;
          const __m512i scj = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * j)));
          for (int a = 0; a < A; ++a) isum[a] = _mm512_add_epi32(isum[a], _mm512_mullo_epi32(s4[a][s], scj));
        }
      }
    }
    for (int a = 0; a < A; ++a) {
      const __m512 d = _mm512_mul_ps(xd, _mm512_set1_ps(y[a][b].d));
      acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[a])));
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

// One Q2_K group against A activations (layout.h, Q2_K_R16). The 2-bit field s of each qs byte goes into
// vpdpbusd where it is, masked (4^s · q, at most 192: still an unsigned byte), and its chain is shifted
// back once per 16-column sub-block (a multiple of 4^s: the arithmetic shift is exact); times the rows'
// 4-bit scales (vpmulld); the mins' nibbles meet the activation's bsum pairs in eight vpdpwssd. Then per
// row sum += (dy·dx)·isum − (dy·dmin)·summs: the scalar Q2_K dot's arithmetic, so results are bitwise the
// plain kernel's.
template <int A>
void group_q2(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* y, float* const* outs, int64_t r0, int n_valid,
              std::size_t pf = 0) {
  using L2 = repack::Q2KLayout;
  const __m512i field[4] = {_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C), _mm512_set1_epi8(0x30),
                            _mm512_set1_epi8(static_cast<char>(0xC0))};
  const __m512i m0F = _mm512_set1_epi32(0x0F);
  __m512 acc[A];
  for (int a = 0; a < A; ++a) acc[a] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + L2::block(b);
    if (pf != 0) prefetch_lines(blk + pf, L2::kBlockBytes);
    __m512i isum[A];
    for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {  // steps 4·half .. 4·half + 3: sub-blocks 8h + 2s + half
        __m512i s4[A][4];
        for (int a = 0; a < A; ++a)
          for (int s = 0; s < 4; ++s) s4[a][s] = _mm512_setzero_si512();
        for (int tt = 0; tt < 4; ++tt) {
          const int t = 4 * half + tt;
          const __m512i qc = loadu512(blk + L2::kQs + 64 * (8 * h + t));
          for (int s = 0; s < 4; ++s) {
            const __m512i q = _mm512_and_si512(qc, field[s]);
            for (int a = 0; a < A; ++a) s4[a][s] = dpbusd_bcast(s4[a][s], q, y[a][b].qs + 128 * h + 32 * s + 4 * t);
          }
        }
        for (int s = 0; s < 4; ++s) {
          // Lane r: row r's scale bytes 2k, 2k + 1 (k = 4h + s) as two int16; sub-block 2k + half's low nibble.
          const __m512i pr = _mm512_cvtepu8_epi16(loadu256(blk + L2::kScales + 32 * (4 * h + s)));
          const __m512i sc = _mm512_and_si512(half == 0 ? pr : _mm512_srli_epi32(pr, 16), m0F);
          for (int a = 0; a < A; ++a)
            isum[a] = _mm512_add_epi32(isum[a], _mm512_mullo_epi32(_mm512_srai_epi32(s4[a][s], 2 * s), sc));
        }
      }
    }
    __m512i summs[A];
    for (int a = 0; a < A; ++a) summs[a] = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      // Lane r: row r's mins 2k, 2k + 1 as int16 (the scale bytes' high nibbles).
      const __m512i mins = _mm512_srli_epi16(_mm512_cvtepu8_epi16(loadu256(blk + L2::kScales + 32 * k)), 4);
      for (int a = 0; a < A; ++a) summs[a] = _mm512_dpwssd_epi32(summs[a], mins, bcast_word(y[a][b].bsums + 2 * k));
    }
    const __m512 xd = _mm512_cvtph_ps(loadu256(blk + L2::kD));
    const __m512 xdmin = _mm512_cvtph_ps(loadu256(blk + L2::kDmin));
    for (int a = 0; a < A; ++a) {
      const __m512 yd = _mm512_set1_ps(y[a][b].d);
      const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(yd, xd), _mm512_cvtepi32_ps(isum[a])),
                                     _mm512_mul_ps(_mm512_mul_ps(yd, xdmin), _mm512_cvtepi32_ps(summs[a])));
      acc[a] = _mm512_add_ps(acc[a], t);
    }
  }
  for (int a = 0; a < A; ++a) store_rows(outs[a] + r0, acc[a], n_valid);
}

// The group kernels as types, for repack::k_rows / k_rows_multi.
struct Q2Group {
  template <int A>
  static void run(auto... args) {
    group_q2<A>(args...);
  }
};
struct Q3Group {
  template <int A>
  static void run(auto... args) {
    group_q3<A>(args...);
  }
};
struct Q4Group {
  template <int A>
  static void run(auto... args) {
    group<A>(args...);
  }
};
struct Q5Group {
  template <int A>
  static void run(auto... args) {
    group<A, true>(args...);
  }
};
struct Q6Group {
  template <int A>
  static void run(auto... args) {
    group_q6<A>(args...);
  }
};

}  // namespace

void dot_rows_q2_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q2_K_R16, Q2Group>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q2_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q2_K_R16, Q2Group>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q3_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q3_K_R16, Q3Group>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q3_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q3_K_R16, Q3Group>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q4_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q4_K_R16, Q4Group>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q4_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q4_K_R16, Q4Group>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q5_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q5_K_R16, Q5Group>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q5_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q5_K_R16, Q5Group>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_q6_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  repack::k_rows<quant::GGMLType::Q6_K_R16, Q6Group>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_q6_k_r16(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                             int nact, float* const* outs) {
  repack::k_rows_multi<quant::GGMLType::Q6_K_R16, Q6Group>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx512
