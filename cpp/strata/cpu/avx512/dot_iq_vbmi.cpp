// IQ3_S and IQ3_XXS dots with Q8_K activations for CPUs with AVX512_VBMI (called only where
// cpu_has_avx512_vbmi()): the grid looked up 64 entries at a time with vpermi2b instead of gathered
// or loaded entry by entry.
//
// A grid (512 entries for IQ3_S, 256 for IQ3_XXS, 4 bytes each) is kept as four byte planes (plane j =
// byte j of every entry), each cut into 128-byte tables; one vpermi2b looks up 64 indices' low 7 bits
// in one table, and bit 7 (the index byte's top bit) and, for IQ3_S, bit 8 (from qh) pick among the
// tables with byte blends. The planes are then interleaved back into entries (unpack bytes, then words,
// within 128-bit lanes); the indices are permuted beforehand so that the entries come out in order,
// four registers of 64 magnitudes. The signs are 64-bit masks (IQ3_S stores them; IQ3_XXS's 7-bit
// fields are cut out with vpmultishiftqb and completed with their parity bit by a 128-byte vpermi2b
// table) that negate the activation bytes; maddubs multiplies, madd applies the two groups' odd scales
// of each register, and each super-block's int32 lanes are added up exactly before the scalar kernel's
// float steps (sum += (dx·dy)·isum, uncontracted, the format's constant at the end): bitwise the
// scalar kernels.
#include <cstring>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
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

// A block decoded: magnitudes, sign masks (bit t of sign[m] negates weight 64m + t) and the 8 groups'
// odd scales.
struct Block {
  __m512i mag[4];
  uint64_t sign[4];
  int scale[8];
};

struct IQ3S {
  using B = BlockIQ3_S;
  static constexpr float kScale = 1.0f;  // 1.0f · x is x: the scalar reference multiplies by nothing
  static float d(const B& b) { return fp16(b.d); }
  static void decode(const B& b, Block& out) {
    uint64_t qh;
    std::memcpy(&qh, b.qh, 8);
    magnitudes<512>(b.qs, qh, planes<512>(quant::kIQ3SGrid), out.mag);
    std::memcpy(out.sign, b.signs, 32);
    for (int m = 0; m < 4; ++m) {
      out.scale[2 * m] = 2 * (b.scales[m] & 15) + 1;
      out.scale[2 * m + 1] = 2 * (b.scales[m] >> 4) + 1;
    }
  }
};

struct IQ3XXS {
  using B = BlockIQ3_XXS;
  static constexpr float kScale = 0.25f;
  static float d(const B& b) { return fp16(b.d); }
  static void decode(const B& b, Block& out) {
    magnitudes<256>(b.qs, 0, planes<256>(quant::kIQ3XXSGrid), out.mag);
    // The 8 groups' words (4 sign fields of 7 bits, then the scale in the top 4) as 4 qwords: byte k of
    // qword m is field k % 4 of group 2m + k / 4, completed to its sign byte, so qword m is sign[m].
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + quant::kQK_K / 4));
    const __m256i fields = _mm256_and_si256(
        _mm256_multishift_epi64_epi8(_mm256_set1_epi64x(0x352E2720150E0700LL), words), _mm256_set1_epi8(0x7F));
    const __m512i bytes = _mm512_permutex2var_epi8(_mm512_load_si512(kSignBytes.v), _mm512_castsi256_si512(fields),
                                                   _mm512_load_si512(kSignBytes.v + 64));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.sign), _mm512_castsi512_si256(bytes));
    for (int g = 0; g < 8; ++g) {
      uint32_t aux;
      std::memcpy(&aux, b.qs + quant::kQK_K / 4 + 4 * g, 4);
      out.scale[g] = static_cast<int>(2 * (aux >> 28) + 1);
    }
  }
};

template <class F>
float dot(int64_t nb, const typename F::B* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    Block blk;
    F::decode(x[i], blk);
    __m512i sumi = _mm512_setzero_si512();
    for (int m = 0; m < 4; ++m) {
      const __m512i q = loadu512(y[i].qs + 64 * m);
      const __m512i sq = _mm512_mask_sub_epi8(q, blk.sign[m], _mm512_setzero_si512(), q);  // |q| ≤ 127
      const __m512i p = _mm512_maddubs_epi16(blk.mag[m], sq);
      const __m512i scales = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(blk.scale[2 * m])),
                                                _mm256_set1_epi16(static_cast<short>(blk.scale[2 * m + 1])), 1);
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, scales));
    }
    sum += (F::d(x[i]) * y[i].d) * static_cast<float>(hsum_i32(sumi));
  }
  return F::kScale * sum;
}

template <class F>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot<F>(nb, reinterpret_cast<const typename F::B*>(p + static_cast<std::size_t>(r) * stride), y);
}

template <class F>
void biased(const void* block, uint8_t* w, int32_t* scales) {
  Block blk;
  F::decode(*static_cast<const typename F::B*>(block), blk);
  for (int m = 0; m < 4; ++m) {
    const __m512i sw = _mm512_mask_sub_epi8(blk.mag[m], blk.sign[m], _mm512_setzero_si512(), blk.mag[m]);
    _mm512_storeu_si512(w + 64 * m, _mm512_xor_si512(sw, _mm512_set1_epi8(static_cast<char>(0x80))));
  }
  for (int g = 0; g < 8; ++g) scales[g] = blk.scale[g];
}

}  // namespace

void iq3_s_vbmi_biased(const void* block, uint8_t* w, int32_t* scales) { biased<IQ3S>(block, w, scales); }
void iq3_xxs_vbmi_biased(const void* block, uint8_t* w, int32_t* scales) { biased<IQ3XXS>(block, w, scales); }

void dot_rows_iq3_s_vbmi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<IQ3S>(n, w, stride, nrows, act, out);
}
void dot_rows_iq3_xxs_vbmi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  rows<IQ3XXS>(n, w, stride, nrows, act, out);
}

}  // namespace strata::cpu::avx512
