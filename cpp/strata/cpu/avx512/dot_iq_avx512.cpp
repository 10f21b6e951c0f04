// AVX-512 VNNI several-activation kernel of the IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M) with Q8_K activations: prefill chunks and verification windows.
//
// Decoding a super-block (grid gathers, sign and scale fields) is most of an IQ dot's work, so each
// super-block of 16 rows is decoded once for all of a call's activations, by the AVX2 group decoders
// (avx2/iq_groups_avx2.h) or, in the VBMI table's kernels, the IQ2 / IQ3 lookups of dot_iq_vbmi.cpp,
// into the register layout of the repacked kernels (cpu/repack/layout.h):
// one 512-bit register per 4-column step whose lane r is row r, each weight + 128 as an unsigned
// byte. Every activation then costs one vpdpbusd per step against its 4 bytes broadcast: per
// 16-weight half a chain from −128·Σy (the Q8_K block's bsums, which removes the bias exactly), one
// vpmulld by the 16 rows' scales of that half, and per super-block sum += (dx·dy)·isum per row, the
// multiply and the add rounded separately (built with -ffp-contract=off), then the format's constant:
// the scalar kernel's arithmetic, so results are bitwise it (and the one-activation dot: the VBMI
// kernel, or the AVX2 one built here).
#include <cstring>

#include "strata/cpu/avx2/dot_iq_avx2.h"
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/repack/row_groups.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockQ8_K;

// One super-block of 16 rows, decoded: w[g][k] lane r holds bytes 4k .. 4k + 3 of row r's group g
// (columns 32g + 4k ..), each weight + 128; sc[h] lane r the int32 scale of row r's 16-weight half h;
// d lane r the row's block scale F::d.
struct Decoded {
  __m512i w[8][8];
  __m512i sc[16];
  __m512 d;
};

// Rows 0..15 (P[j] = row j in the low 256 bits, row j + 8 in the high) → 8 registers, register k
// holding dword k of every row in lane r. Three swaps of a register-index bit with a lane-index bit:
// register j = r mod 8 and lane (r / 8)·8 + k at the start, register k and lane r at the end.
// kSwap[bit][0 / 1]: the vpermt2d indices of the register of the pair whose index has `bit` clear /
// set: lane l takes lane l with `bit` cleared / set of the first (l's bit clear) or second register.
struct SwapIndices {
  alignas(64) int32_t v[3][2][16];
  constexpr SwapIndices() : v{} {
    for (int bit = 0; bit < 3; ++bit)
      for (int l = 0; l < 16; ++l) {
        const int m = 1 << bit, from_b = (l & m) ? 16 : 0;
        v[bit][0][l] = from_b | (l & ~m);
        v[bit][1][l] = from_b | (l | m);
      }
  }
};
alignas(64) constexpr SwapIndices kSwap{};

inline void transpose_16x8(__m512i P[8]) {
  for (int bit = 2; bit >= 0; --bit) {
    const int m = 1 << bit;
    const __m512i idx_a = _mm512_load_si512(kSwap.v[bit][0]), idx_b = _mm512_load_si512(kSwap.v[bit][1]);
    for (int j = 0; j < 8; ++j) {
      if (j & m) continue;
      const __m512i a = P[j], b = P[j | m];
      P[j] = _mm512_permutex2var_epi32(a, idx_a, b);
      P[j | m] = _mm512_permutex2var_epi32(a, idx_b, b);
    }
  }
}

// A row decoder writes one block's 256 weights + 128 (signs applied) in order and the odd scale of each 16
// weights: the AVX2 group decoders (decode_row), or the VBMI lookups of dot_iq_vbmi.cpp.
using RowDecoder = void (*)(const void* block, uint8_t* w, int32_t* scales);

template <class F>
void decode_row(const void* block, uint8_t* w, int32_t* scales) {
  const auto& b = *static_cast<const typename F::Block*>(block);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int g = 0; g < 8; ++g) {
    const avx2::IqGroup q = F::group(b, g);
    const __m256i sw = _mm256_xor_si256(_mm256_sign_epi8(q.u, q.s), bias);  // |w| ≤ 62: w + 128 fits a byte
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 32 * g), sw);
    scales[2 * g] = _mm256_extract_epi16(q.scales, 0);
    scales[2 * g + 1] = _mm256_extract_epi16(q.scales, 8);
  }
}

// Super-block i of the n_valid rows at `rows` (stride bytes apart); missing rows decode as zeros.
template <class F, RowDecoder Row>
void decode(const uint8_t* rows, std::size_t stride, int64_t i, int n_valid, Decoded& D) {
  alignas(64) uint8_t wb[16][256];
  alignas(64) int32_t s16[16][16];
  alignas(64) int32_t sc[16][16] = {};
  alignas(64) float d[16] = {};
  for (int r = 0; r < n_valid; ++r) {
    const auto* blk = reinterpret_cast<const typename F::Block*>(rows + static_cast<std::size_t>(r) * stride) + i;
    d[r] = F::d(*blk);
    Row(blk, wb[r], s16[r]);
    for (int h = 0; h < 16; ++h) sc[h][r] = s16[r][h];
  }
  const __m256i zero = _mm256_set1_epi8(static_cast<char>(0x80));  // weight 0
  for (int g = 0; g < 8; ++g) {
    __m512i P[8];
    for (int j = 0; j < 8; ++j) {
      const __m256i lo = j < n_valid ? _mm256_load_si256(reinterpret_cast<const __m256i*>(wb[j] + 32 * g)) : zero;
      const __m256i hi =
          j + 8 < n_valid ? _mm256_load_si256(reinterpret_cast<const __m256i*>(wb[j + 8] + 32 * g)) : zero;
      P[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    transpose_16x8(P);
    for (int k = 0; k < 8; ++k) D.w[g][k] = P[k];
  }
  for (int h = 0; h < 16; ++h) D.sc[h] = _mm512_load_si512(sc[h]);
  D.d = _mm512_load_ps(d);
}

// The decoded super-block against A activations (block i of each): acc[a] += (d·dy)·isum per row.
template <int A>
void apply(const Decoded& D, const BlockQ8_K* const* y, int64_t i, __m512* acc) {
  __m512i isum[A];
  for (int a = 0; a < A; ++a) isum[a] = _mm512_setzero_si512();
  for (int h = 0; h < 16; ++h) {
    const __m512i* w = &D.w[h / 2][4 * (h % 2)];
    for (int a = 0; a < A; ++a) {
      const BlockQ8_K& yb = y[a][i];
      __m512i c = _mm512_set1_epi32(-128 * static_cast<int32_t>(yb.bsums[h]));
      for (int s = 0; s < 4; ++s) c = dpbusd_bcast(c, w[s], yb.qs + 16 * h + 4 * s);
      isum[a] = _mm512_add_epi32(isum[a], _mm512_mullo_epi32(c, D.sc[h]));
    }
  }
  for (int a = 0; a < A; ++a) {
    const __m512 dd = _mm512_mul_ps(D.d, _mm512_set1_ps(y[a][i].d));
    acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum[a])));
  }
}

template <class F, RowDecoder Row>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  const auto* const* y = reinterpret_cast<const BlockQ8_K* const*>(acts);
  const int64_t nb = n / quant::kQK_K;
  const auto* p = static_cast<const uint8_t*>(w);
  alignas(64) Decoded D;
  constexpr int kMaxActs = static_cast<int>(kMaxActGroup);  // what the engine hands a call at most
  for (int a0 = 0; a0 < nact; a0 += kMaxActs) {
    const int na = std::min(kMaxActs, nact - a0);
    for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
      const int nv = static_cast<int>(std::min<int64_t>(16, nrows - r0));
      __m512 acc[kMaxActs];
      for (int a = 0; a < na; ++a) acc[a] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) {
        decode<F, Row>(p + static_cast<std::size_t>(r0) * stride, stride, i, nv, D);
        // Passes of at most four activations over the decoded block (their chains stay in registers).
        repack::for_each_act_pass<4>(na, [&]<int A>(int a) { apply<A>(D, y + a0 + a, i, acc + a); });
      }
      const __m512 k = _mm512_set1_ps(F::kScale);
      for (int a = 0; a < na; ++a) store_rows(outs[a0 + a] + r0, _mm512_mul_ps(k, acc[a]), nv);
    }
  }
}

}  // namespace

// One activation: the AVX2 kernels built here (the VBMI ones are another table: kernels_avx512.cpp).
// Several: this file's kernel over the AVX2 group decoders, and over the VBMI lookups for the VBMI table.
#define STRATA_IQ_ENTRIES(name, F)                                                                                 \
  void dot_rows_##name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) { \
    avx2::iq_rows<avx2::F>(n, w, stride, nrows, act, out);                                                         \
  }                                                                                                                \
  void dot_rows_multi_##name(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, \
                             int nact, float* const* outs) {                                                       \
    rows_multi<avx2::F, decode_row<avx2::F>>(n, w, stride, nrows, acts, nact, outs);                               \
  }
#define STRATA_IQ_MULTI_VBMI(name, F)                                                            \
  void dot_rows_multi_##name##_vbmi(int64_t n, const void* w, std::size_t stride, int64_t nrows, \
                                    const void* const* acts, int nact, float* const* outs) {     \
    rows_multi<avx2::F, name##_vbmi_biased>(n, w, stride, nrows, acts, nact, outs);              \
  }
STRATA_IQ_ENTRIES(iq2_xxs, IQ2XXS)
STRATA_IQ_ENTRIES(iq2_xs, IQ2XS)
STRATA_IQ_ENTRIES(iq2_s, IQ2S)
STRATA_IQ_ENTRIES(iq3_xxs, IQ3XXS)
STRATA_IQ_ENTRIES(iq3_s, IQ3S)
STRATA_IQ_ENTRIES(iq1_s, IQ1S)
STRATA_IQ_ENTRIES(iq1_m, IQ1M)
STRATA_IQ_MULTI_VBMI(iq2_xxs, IQ2XXS)
STRATA_IQ_MULTI_VBMI(iq2_xs, IQ2XS)
STRATA_IQ_MULTI_VBMI(iq2_s, IQ2S)
STRATA_IQ_MULTI_VBMI(iq3_xxs, IQ3XXS)
STRATA_IQ_MULTI_VBMI(iq3_s, IQ3S)
#undef STRATA_IQ_ENTRIES
#undef STRATA_IQ_MULTI_VBMI

}  // namespace strata::cpu::avx512
