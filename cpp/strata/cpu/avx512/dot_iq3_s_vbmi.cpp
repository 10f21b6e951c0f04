// IQ3_S dot with Q8_K activations for CPUs with AVX512_VBMI (called only where cpu_has_avx512_vbmi()):
// the grid looked up 64 entries at a time with vpermi2b instead of gathered 8 at a time.
//
// The 512-entry grid is kept as four byte planes (plane j = byte j of every entry), each four
// 128-byte tables; one vpermi2b looks up 64 indices' low 7 bits in one table, and bit 7 (the index
// byte's top bit) and bit 8 (from qh) pick among the four with byte blends. The planes are then
// interleaved back into entries (unpack bytes, then words, within 128-bit lanes); the indices are
// permuted beforehand so that the interleaved entries come out in order, four registers of 64
// magnitudes. The signs negate the activation bytes under the block's 64-bit sign masks, maddubs
// multiplies, madd applies the two groups' odd scales of each register, and each super-block's
// int32 lanes are added up exactly before the scalar kernel's float steps (sum += (dx·dy)·isum,
// uncontracted): bitwise the scalar kernel.
#include <cstring>

#include "strata/cpu/avx512/dot_avx512.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/quant/blocks.h"
#include "strata/quant/iq_grids.h"

namespace strata::cpu::avx512 {
namespace {

using quant::BlockIQ3_S;
using quant::BlockQ8_K;

struct Planes {
  alignas(64) uint8_t p[4][512];
};

// Built on first use (only on a CPU that runs this file's code).
const Planes& planes() {
  static const Planes P = [] {
    Planes r{};
    for (int e = 0; e < 512; ++e)
      for (int j = 0; j < 4; ++j) r.p[j][e] = static_cast<uint8_t>(quant::kIQ3SGrid[e] >> (8 * j));
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

// The 256 magnitudes of a block, in order, as four registers.
inline void magnitudes(const BlockIQ3_S& b, const Planes& P, __m512i out[4]) {
  const __m512i order = _mm512_load_si512(kOrder.v);
  const __m512i idx = _mm512_permutexvar_epi8(order, loadu512(b.qs));
  uint64_t qh;
  std::memcpy(&qh, b.qh, 8);  // bit e: the ninth bit of index e
  const __mmask64 bit7 = _mm512_movepi8_mask(idx);
  const __mmask64 bit8 = _mm512_movepi8_mask(_mm512_permutexvar_epi8(order, _mm512_movm_epi8(qh)));
  __m512i plane[4];
  for (int j = 0; j < 4; ++j) {
    const uint8_t* t = P.p[j];
    const __m512i e0 = _mm512_permutex2var_epi8(_mm512_load_si512(t), idx, _mm512_load_si512(t + 64));
    const __m512i e1 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), idx, _mm512_load_si512(t + 192));
    const __m512i e2 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 256), idx, _mm512_load_si512(t + 320));
    const __m512i e3 = _mm512_permutex2var_epi8(_mm512_load_si512(t + 384), idx, _mm512_load_si512(t + 448));
    plane[j] = _mm512_mask_blend_epi8(bit8, _mm512_mask_blend_epi8(bit7, e0, e1), _mm512_mask_blend_epi8(bit7, e2, e3));
  }
  const __m512i b01l = _mm512_unpacklo_epi8(plane[0], plane[1]), b01h = _mm512_unpackhi_epi8(plane[0], plane[1]);
  const __m512i b23l = _mm512_unpacklo_epi8(plane[2], plane[3]), b23h = _mm512_unpackhi_epi8(plane[2], plane[3]);
  out[0] = _mm512_unpacklo_epi16(b01l, b23l);
  out[1] = _mm512_unpackhi_epi16(b01l, b23l);
  out[2] = _mm512_unpacklo_epi16(b01h, b23h);
  out[3] = _mm512_unpackhi_epi16(b01h, b23h);
}

float dot(int64_t nb, const BlockIQ3_S* x, const BlockQ8_K* y, const Planes& P) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    __m512i mag[4];
    magnitudes(x[i], P, mag);
    __m512i sumi = _mm512_setzero_si512();
    for (int m = 0; m < 4; ++m) {
      uint64_t s;
      std::memcpy(&s, x[i].signs + 8 * m, 8);  // bit t negates weight 64m + t
      const __m512i q = loadu512(y[i].qs + 64 * m);
      const __m512i sq = _mm512_mask_sub_epi8(q, s, _mm512_setzero_si512(), q);  // |q| ≤ 127
      const __m512i p = _mm512_maddubs_epi16(mag[m], sq);
      const int sc = x[i].scales[m];  // groups 2m (low nibble) and 2m + 1 (high nibble)
      const __m512i scales = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * (sc & 15) + 1)),
                                                _mm256_set1_epi16(static_cast<short>(2 * (sc >> 4) + 1)), 1);
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, scales));
    }
    sum += (fp16(x[i].d) * y[i].d) * static_cast<float>(hsum_i32(sumi));
  }
  return sum;
}

}  // namespace

void iq3_s_vbmi_biased(const void* block, uint8_t* w, int32_t* scales) {
  const auto& b = *static_cast<const BlockIQ3_S*>(block);
  __m512i mag[4];
  magnitudes(b, planes(), mag);
  for (int m = 0; m < 4; ++m) {
    uint64_t s;
    std::memcpy(&s, b.signs + 8 * m, 8);
    const __m512i sw = _mm512_mask_sub_epi8(mag[m], s, _mm512_setzero_si512(), mag[m]);
    _mm512_storeu_si512(w + 64 * m, _mm512_xor_si512(sw, _mm512_set1_epi8(static_cast<char>(0x80))));
    scales[2 * m] = 2 * (b.scales[m] & 15) + 1;
    scales[2 * m + 1] = 2 * (b.scales[m] >> 4) + 1;
  }
}

void dot_rows_iq3_s_vbmi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const Planes& P = planes();
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const int64_t nb = n / quant::kQK_K;
  for (int64_t r = 0; r < nrows; ++r)
    out[r] = dot(nb, reinterpret_cast<const BlockIQ3_S*>(p + static_cast<std::size_t>(r) * stride), y, P);
}

}  // namespace strata::cpu::avx512
