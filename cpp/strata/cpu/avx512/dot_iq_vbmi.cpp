// IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS and IQ2_S dots with Q8_K activations for CPUs with AVX512_VBMI
// (called only where cpu_has_avx512_vbmi()): the grid looked up many entries per instruction instead of
// gathered or loaded entry by entry.
//
// IQ2: every IQ2 grid byte is 8, 25 or 43, so an entry (8 bytes) is a 16-bit code of 2-bit digits: the
// 32 indices of a block look their codes up with vpermi2w (64 codes a table), index bits 6 and up pick
// among the tables with word blends, and each register of 64 magnitudes is 8 codes widened to qwords,
// their digits cut into bytes by vpmultishiftqb and mapped to 8 / 25 / 43 by one vpshufb.
//
// IQ3: a grid (512 entries for IQ3_S, 256 for IQ3_XXS, 4 bytes each) is kept as four byte planes
// (plane j = byte j of every entry), each cut into 128-byte tables; one vpermi2b looks up 64 indices'
// low 7 bits in one table, and bit 7 (the index byte's top bit) and, for IQ3_S, bit 8 (from qh) pick
// among the tables with byte blends. The planes are then interleaved back into entries (unpack bytes,
// then words, within 128-bit lanes); the indices are permuted beforehand so that the entries come out
// in order, four registers of 64 magnitudes.
//
// Both: the signs are 64-bit masks (IQ2_S and IQ3_S store them; the 7-bit fields of IQ2_XXS, IQ2_XS
// and IQ3_XXS are cut out with vpmultishiftqb or shifts and completed with their parity bit by a
// 128-byte vpermi2b table) that negate the activation bytes; maddubs multiplies, madd applies the odd
// scale of each 16 weights (one vpermw spreads them over a register's 128-bit lanes), and each
// super-block's int32 lanes are added up exactly before the scalar kernel's float steps
// (sum += (dx·dy)·isum, uncontracted, the format's constant at the end): bitwise the scalar kernels.
#include <cstring>

#include "strata/cpu/avx2/dot_iq_avx2.h"
#include "strata/cpu/avx2/iq_groups_avx2.h"
#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockQ8_K;

template <int Entries>
struct Planes {
  alignas(64) uint8_t p[4][Entries];
};

// Built on first use (only on a CPU that runs this file's code).
template <int Entries>
const Planes<Entries>& planes(const uint32_t* grid) {
  static const Planes<Entries> P = [grid] {
    Planes<Entries> r{};
    for (int e = 0; e < Entries; ++e)
      for (int j = 0; j < 4; ++j) r.p[j][e] = static_cast<uint8_t>(grid[e] >> (8 * j));
    return r;
  }();
  return P;
}

// Position q of the permuted index register holds entry kOrder[q]: after the byte and word
// unpacks, register m's 128-bit lane L holds the entries of positions 16L + 4m .. 16L + 4m + 3,
// which must be entries 16m + 4L ...: the 64 magnitudes of weights 64m .. 64m + 63 in order.
struct Order {
  alignas(64) uint8_t v[64];
  constexpr Order() : v{} {
    for (int q = 0; q < 64; ++q) v[q] = static_cast<uint8_t>(16 * ((q % 16) / 4) + 4 * (q / 16) + q % 4);
  }
};
alignas(64) constexpr Order kOrder{};

// The full sign byte of a 7-bit field: bit 7 makes the number of negatives even.
struct SignBytes {
  alignas(64) uint8_t v[128];
  constexpr SignBytes() : v{} {
    for (int f = 0; f < 128; ++f) {
      int bits = 0;
      for (int k = 0; k < 7; ++k) bits += (f >> k) & 1;
      v[f] = static_cast<uint8_t>(f | ((bits & 1) << 7));
    }
  }
};
alignas(64) constexpr SignBytes kSignBytes{};

// Entries idx (permuted by kOrder) of one plane, 128 entries per table.
template <int Entries>
inline __m512i plane_lookup(const uint8_t* t, __m512i idx, __mmask64 bit7, __mmask64 bit8) {
  const __m512i e0 = _mm512_permutex2var_epi8(_mm512_load_si512(t), idx, _mm512_load_si512(t + 64));
  const __m512i e1 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), idx, _mm512_load_si512(t + 192));
  const __m512i lo = _mm512_mask_blend_epi8(bit7, e0, e1);
  if constexpr (Entries == 256) {
    (void)bit8;
    return lo;
  } else {
    const __m512i e2 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 256), idx, _mm512_load_si512(t + 320));
    const __m512i e3 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 384), idx, _mm512_load_si512(t + 448));
    return _mm512_mask_blend_epi8(bit8, lo, _mm512_mask_blend_epi8(bit7, e2, e3));
  }
}

// The 256 magnitudes of a block whose 64 index bytes are at qs (qh: IQ3_S's ninth bits, bit e for
// index e), in order, as four registers.
template <int Entries>
inline void magnitudes(const uint8_t* qs, uint64_t qh, const Planes<Entries>& P, __m512i out[4]) {
  const __m512i order = _mm512_load_si512(kOrder.v);
  const __m512i idx = _mm512_permutexvar_epi8(order, loadu512(qs));
  const __mmask64 bit7 = _mm512_movepi8_mask(idx);
  __mmask64 bit8 = 0;
  if constexpr (Entries == 512) bit8 = _mm512_movepi8_mask(_mm512_permutexvar_epi8(order, _mm512_movm_epi8(qh)));
  __m512i plane[4];
  for (int j = 0; j < 4; ++j) plane[j] = plane_lookup<Entries>(P.p[j], idx, bit7, bit8);
  const __m512i b01l = _mm512_unpacklo_epi8(plane[0], plane[1]), b01h = _mm512_unpackhi_epi8(plane[0], plane[1]);
  const __m512i b23l = _mm512_unpacklo_epi8(plane[2], plane[3]), b23h = _mm512_unpackhi_epi8(plane[2], plane[3]);
  out[0] = _mm512_unpacklo_epi16(b01l, b23l);
  out[1] = _mm512_unpackhi_epi16(b01l, b23l);
  out[2] = _mm512_unpacklo_epi16(b01h, b23h);
  out[3] = _mm512_unpackhi_epi16(b01h, b23h);
}

// A block decoded: magnitudes, sign masks (bit t of sign[m] negates weight 64m + t) and the odd scale
// of each 16 weights.
struct Looked {
  __m512i mag[4];
  alignas(32) uint64_t sign[4];
  __m256i half;  // int16 lane h: the odd scale of weights 16h .. 16h + 15
};

// Odd scales 2n + 1 from 4-bit n: of 16 halves from 8 bytes of nibbles (byte i: halves 2i, 2i + 1), or of 8
// groups from 4 such bytes, each group's for both of its halves. In registers: scalar stores read back
// as a vector would stall on store forwarding.
inline __m256i odd(__m256i n) { return _mm256_add_epi16(_mm256_add_epi16(n, n), _mm256_set1_epi16(1)); }
inline __m128i nibbles(uint64_t bytes) {
  const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(bytes));
  const __m128i m = _mm_set1_epi8(15);
  return _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
}
inline __m256i half_scales_of_halves(uint64_t bytes8) { return odd(_mm256_cvtepu8_epi16(nibbles(bytes8))); }
inline __m256i half_scales_of_groups(uint32_t bytes4) {
  const __m128i g = _mm_cvtepu8_epi16(nibbles(bytes4));  // 8 group nibbles as words
  return odd(_mm256_set_m128i(_mm_unpackhi_epi16(g, g), _mm_unpacklo_epi16(g, g)));
}
// Group scales in the top 4 bits of 8 dwords, each for both halves of its group.
inline __m256i half_scales_of_top_nibbles(__m256i dwords) {
  const __m256i n = _mm256_srli_epi32(dwords, 28);
  return odd(_mm256_or_si256(n, _mm256_slli_epi32(n, 16)));
}

// 32 sign bytes (run k's at byte k) from 32 7-bit fields (bytes, top bit ignored): the parity bit added.
inline void sign_bytes_from_fields(__m256i fields, uint64_t* sign) {
  const __m512i f = _mm512_castsi256_si512(_mm256_and_si256(fields, _mm256_set1_epi8(0x7F)));
  const __m512i bytes =
      _mm512_permutex2var_epi8(_mm512_load_si512(kSignBytes.v), f, _mm512_load_si512(kSignBytes.v + 64));
  _mm256_store_si256(reinterpret_cast<__m256i*>(sign), _mm512_castsi512_si256(bytes));
}

struct IQ3S : avx2::IQ3S {  // Block, d and kScale: the AVX2 decoder's
  static void decode(const Block& b, Looked& out) {
    uint64_t qh;
    std::memcpy(&qh, b.qh, 8);
    magnitudes<512>(b.qs, qh, planes<512>(quant::kIQ3SGrid), out.mag);
    std::memcpy(out.sign, b.signs, 32);
    uint32_t sc;
    std::memcpy(&sc, b.scales, 4);
    out.half = half_scales_of_groups(sc);
  }
};

struct IQ3XXS : avx2::IQ3XXS {  // Block, d and kScale: the AVX2 decoder's
  static void decode(const Block& b, Looked& out) {
    magnitudes<256>(b.qs, 0, planes<256>(quant::kIQ3XXSGrid), out.mag);
    // The 8 groups' words (4 sign fields of 7 bits, then the scale in the top 4) as 4 qwords: byte k of
    // qword m is field k % 4 of group 2m + k / 4, completed to its sign byte, so qword m is sign[m].
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + quant::kQK_K / 4));
    sign_bytes_from_fields(_mm256_multishift_epi64_epi8(_mm256_set1_epi64x(0x352E2720150E0700LL), words), out.sign);
    out.half = half_scales_of_top_nibbles(words);
  }
};

// The IQ2 grids as codes: code[e] = Σ_j digit_j · 4^j, digit 0 / 1 / 2 for byte j = 8 / 25 / 43 (the
// only values these grids hold).
template <int Entries>
struct Codes {
  alignas(64) uint16_t v[Entries];
};

template <int Entries>
const Codes<Entries>& codes(const uint64_t* grid) {
  static const Codes<Entries> C = [grid] {
    Codes<Entries> r{};
    for (int e = 0; e < Entries; ++e) {
      unsigned c = 0;
      for (int j = 0; j < 8; ++j) {
        const unsigned v = static_cast<unsigned>(grid[e] >> (8 * j)) & 0xFF;
        c |= (v == 8 ? 0u : v == 25 ? 1u : 2u) << (2 * j);
      }
      r.v[e] = static_cast<uint16_t>(c);
    }
    return r;
  }();
  return C;
}

// The codes of 32 indices (one per word), 64 per vpermi2w table, index bits 6 and up picking the table.
template <int Entries>
inline __m512i lookup_codes(__m512i idx, const Codes<Entries>& C) {
  constexpr int kTables = Entries / 64;
  __m512i r[kTables];
  for (int t = 0; t < kTables; ++t)
    r[t] = _mm512_permutex2var_epi16(_mm512_load_si512(C.v + 64 * t), idx, _mm512_load_si512(C.v + 64 * t + 32));
  int n = kTables;
  for (int bit = 6; n > 1; ++bit, n /= 2) {
    const __mmask32 hi = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(static_cast<short>(1 << bit)));
    for (int t = 0; t < n / 2; ++t) r[t] = _mm512_mask_blend_epi16(hi, r[2 * t], r[2 * t + 1]);
  }
  return r[0];
}

// Register m of magnitudes: the 8 codes of runs 8m .. 8m + 7 (128-bit lane m of `codes`) as qwords,
// byte j of each taking digit j (bits 2j, 2j + 1), mapped to 8 / 25 / 43.
template <int M>
inline __m512i expand_codes(__m512i codes) {
  const __m512i q = _mm512_cvtepu16_epi64(_mm512_extracti32x4_epi32(codes, M));
  const __m512i digits =
      _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x0E0C0A0806040200LL), q), _mm512_set1_epi8(3));
  const __m512i values = _mm512_broadcast_i32x4(_mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
  return _mm512_shuffle_epi8(values, digits);
}

template <int Entries>
inline void iq2_magnitudes(__m512i idx, const Codes<Entries>& C, __m512i mag[4]) {
  const __m512i c = lookup_codes<Entries>(idx, C);
  mag[0] = expand_codes<0>(c);
  mag[1] = expand_codes<1>(c);
  mag[2] = expand_codes<2>(c);
  mag[3] = expand_codes<3>(c);
}

// IQ2_XS / IQ2_S: scale nibble h of scales[] for the 16 weights of half h.
template <class B>
inline __m256i half_scales(const B& b) {
  uint64_t sc;
  std::memcpy(&sc, b.scales, 8);
  return half_scales_of_halves(sc);
}

// Byte 4g + f of the result: byte 8g + f of the block's 64 bytes (IQ2_XXS's 8 groups of two words).
struct Compress {
  alignas(64) uint8_t v[64];
  constexpr Compress() : v{} {
    for (int k = 0; k < 32; ++k) v[k] = static_cast<uint8_t>(8 * (k / 4) + k % 4);
  }
};
alignas(64) constexpr Compress kCompress{};

struct IQ2XXS : avx2::IQ2XXS {  // Block, d and kScale: the AVX2 decoder's
  static void decode(const Block& b, Looked& out) {
    // Group g is the qword at byte 8g: its low 4 bytes index the grid (runs 4g .. 4g + 3), its high word
    // holds the four 7-bit sign fields (bits 32, 39, 46, 53) and the scale (top 4 bits).
    const __m512i q = loadu512(b.qs);
    const __m512i compress = _mm512_load_si512(kCompress.v);
    const __m256i idx8 = _mm512_castsi512_si256(_mm512_permutexvar_epi8(compress, q));
    iq2_magnitudes<256>(_mm512_cvtepu8_epi16(idx8), codes<256>(quant::kIQ2XXSGrid), out.mag);
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720352E2720LL), q);
    sign_bytes_from_fields(_mm512_castsi512_si256(_mm512_permutexvar_epi8(compress, fields)), out.sign);
    out.half = half_scales_of_top_nibbles(_mm512_cvtepi64_epi32(_mm512_srli_epi64(q, 32)));
  }
};

struct IQ2XS : avx2::IQ2XS {  // Block, d and kScale: the AVX2 decoder's
  static void decode(const Block& b, Looked& out) {
    const __m512i q = loadu512(b.qs);  // run k: index in the low 9 bits, its sign field in the top 7
    iq2_magnitudes<512>(_mm512_and_si512(q, _mm512_set1_epi16(511)), codes<512>(quant::kIQ2XSGrid), out.mag);
    sign_bytes_from_fields(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9)), out.sign);
    out.half = half_scales(b);
  }
};

struct IQ2S : avx2::IQ2S {  // Block, d and kScale: the AVX2 decoder's
  static void decode(const Block& b, Looked& out) {
    // Run k's index: qs[k] and bits 2 (k % 4), 2 (k % 4) + 1 of qh[k / 4], i.e. bits 2k, 2k + 1 of qh
    // read as one little-endian qword, on top.
    uint64_t qh;
    std::memcpy(&qh, b.qh, 8);
    const __m256i top = _mm256_and_si256(
        _mm256_multishift_epi64_epi8(
            _mm256_setr_epi64x(0x0E0C0A0806040200LL, 0x1E1C1A1816141210LL, 0x2E2C2A2826242220LL, 0x3E3C3A3836343230LL),
            _mm256_set1_epi64x(static_cast<long long>(qh))),
        _mm256_set1_epi8(3));
    const __m512i idx =
        _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs))),
                        _mm512_slli_epi16(_mm512_cvtepu8_epi16(top), 8));
    iq2_magnitudes<1024>(idx, codes<1024>(quant::kIQ2SGrid), out.mag);
    std::memcpy(out.sign, b.signs, 32);
    out.half = half_scales(b);
  }
};

// kHalfOfLane[m]: word lane w of register m belongs to half 4m + w / 8 (its 128-bit lane).
struct HalfOfLane {
  alignas(64) uint16_t v[4][32];
  constexpr HalfOfLane() : v{} {
    for (int m = 0; m < 4; ++m)
      for (int w = 0; w < 32; ++w) v[m][w] = static_cast<uint16_t>(4 * m + w / 8);
  }
};
alignas(64) constexpr HalfOfLane kHalfOfLane{};

template <class F>
float dot(int64_t nb, const typename F::Block* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    Looked blk;
    F::decode(x[i], blk);
    const __m512i halves = _mm512_castsi256_si512(blk.half);
    __m512i sumi = _mm512_setzero_si512();
    for (int m = 0; m < 4; ++m) {
      const __m512i q = loadu512(y[i].qs + 64 * m);
      const __m512i sq = _mm512_mask_sub_epi8(q, blk.sign[m], _mm512_setzero_si512(), q);  // |q| ≤ 127
      const __m512i p = _mm512_maddubs_epi16(blk.mag[m], sq);
      const __m512i scales = _mm512_permutexvar_epi16(_mm512_load_si512(kHalfOfLane.v[m]), halves);
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, scales));
    }
    sum += (F::d(x[i]) * y[i].d) * static_cast<float>(hsum_i32(sumi));
  }
  return F::kScale * sum;
}

template <class F>
void biased(const void* block, uint8_t* w, int32_t* scales) {
  Looked blk;
  F::decode(*static_cast<const typename F::Block*>(block), blk);
  for (int m = 0; m < 4; ++m) {
    const __m512i sw = _mm512_mask_sub_epi8(blk.mag[m], blk.sign[m], _mm512_setzero_si512(), blk.mag[m]);
    _mm512_storeu_si512(w + 64 * m, _mm512_xor_si512(sw, _mm512_set1_epi8(static_cast<char>(0x80))));
  }
  _mm512_storeu_si512(scales, _mm512_cvtepi16_epi32(blk.half));
}

}  // namespace

// The entry points: one activation (the AVX2 kernels' row loop over this file's dot) and the block
// decoder of the AVX-512 several-activation kernel (dot_iq_avx512.cpp).
#define STRATA_VBMI_ENTRIES(name, F)                                                                        \
  void name##_vbmi_biased(const void* block, uint8_t* w, int32_t* scales) { biased<F>(block, w, scales); }  \
  void dot_rows_##name##_vbmi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, \
                              float* out) {                                                                 \
    avx2::iq_rows<F, dot<F>>(n, w, stride, nrows, act, out);                                                \
  }
STRATA_VBMI_ENTRIES(iq3_s, IQ3S)
STRATA_VBMI_ENTRIES(iq3_xxs, IQ3XXS)
STRATA_VBMI_ENTRIES(iq2_xxs, IQ2XXS)
STRATA_VBMI_ENTRIES(iq2_xs, IQ2XS)
STRATA_VBMI_ENTRIES(iq2_s, IQ2S)
#undef STRATA_VBMI_ENTRIES

}  // namespace strata::cpu::avx512
