// AVX-512 versions of the attention kernels (engine/attention_kernels.h). int8 cells with head
// sizes made of whole 64-blocks (the strata format's Dh = 64, 128, ...) and f32 / fp16 cells with
// Dh a multiple of 8 (scores) or 16 (values) run 16-lane kernels below; other shapes and the
// indexer run the 8-lane kernels of engine/x86/attention_kernels_x86.h compiled in this file (32 ymm
// registers: passes of four query heads over four cells, where the AVX2 table's 16 take two cells at a
// time for a group of four). The per-lane operations
// are those of the AVX2 and portable kernels (vec_dot.h's lanes and tree; multiplies and adds
// separate for int8 cells, fused for f32 / fp16), so the results are bitwise the same; what 16 lanes
// and 32 registers buy: two cells' 8-lane dot sums share one zmm (cells c and c + 4 of a batch of
// eight, so the tree below leaves the eight totals in order), and a chunk's value sums cover a whole
// 64-column block for three heads.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

// GCC 12 reports its own AVX-512 conversions as reading an uninitialized value (the header's
// __Y = __Y idiom), as in cpu/avx512/simd_avx512.h.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "strata/engine/attention_kernels.h"
#include "strata/engine/kv_quant.h"
#include "strata/engine/x86/attention_kernels_x86.h"
#include "strata/util/fp16.h"

namespace strata::engine {
namespace {

// The 8-lane kernels compiled here: -mavx512vl gives them 32 ymm registers (ymm16-31), so a pass
// covers four query heads (a Qwen3-style GQA group of four reads each K and V line once).
constexpr AttnKernels kEightLane = x86::table</*Regs=*/32>();

// The loops over heads, cells and registers are unrolled at every optimisation level (-O2 kept
// the accumulator arrays on the stack otherwise).

constexpr int kCells = 8;   // cells per batch: four zmm of two cells each
constexpr int kMaxG = 3;    // heads per pass
constexpr int kPiece = 64;  // cells per piece of the value kernel (its weights on the stack)

// x86::mul_add on 16 lanes: acc + a·b, separate (int8 cells) or fused (f32 / fp16 cells).
template <bool Fused>
inline __m512 mul_add(__m512 acc, __m512 a, __m512 b) {
  if constexpr (Fused)
    return _mm512_fmadd_ps(a, b, acc);
  else
    return _mm512_add_ps(acc, _mm512_mul_ps(a, b));
}

// Eight int8 of cell a in lanes 0-7, eight of cell b in lanes 8-15, as floats.
inline __m512 load_pair(const int8_t* a, const int8_t* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i ab = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(lo), reinterpret_cast<const double*>(b)));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ab));
}

// Eight elements of cell a in lanes 0-7, eight of cell b in lanes 8-15, as floats (fp16 -> f32 is
// exact, as fp16_to_fp32).
inline __m512 load_pair(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
inline __m512 load_pair(const uint16_t* a, const uint16_t* b) {
  const __m256i ab =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_cvtph_ps(ab);
}

// Sixteen elements as floats.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The 8-lane dot sums of G query heads with the eight cells k[0..7] over columns [o, o + len) (len a
// multiple of 8): acc[p][g] holds cells p and p + 4 (from +0; per element one multiply, then one add,
// or for f32 / fp16 cells one fused multiply-add).
template <typename T, int G>
inline void pair_dots(const float* const* q, const T* const* k, int64_t o, int len, __m512 (&acc)[4][G]) {
#pragma GCC unroll 16
  for (int p = 0; p < 4; ++p)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[p][g] = _mm512_setzero_ps();
  for (int j = 0; j < len; j += 8) {
    __m512 qv[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) qv[g] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[g] + o + j));
#pragma GCC unroll 16
    for (int p = 0; p < 4; ++p) {
      const __m512 kv = load_pair(k[p] + o + j, k[p + 4] + o + j);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc[p][g] = mul_add<x86::kFused<T>>(acc[p][g], qv[g], kv);
    }
  }
}

// _mm256_hadd_ps on each 256-bit half: per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3].
inline __m512 hadd512(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

// p_j = [cell j | cell j+4] (8 lanes each). Lane c of the result: cell c's
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). After two hadds the 128-bit lanes hold the quad sums
// [c0-c3 (l0..l3)], [c0-c3 (l4..l7)], [c4-c7 (l0..l3)], [c4-c7 (l4..l7)]; one add of the swapped
// lanes gives the totals, one shuffle puts c0-c3 and c4-c7 side by side.
inline __m256 reduce8(__m512 p0, __m512 p1, __m512 p2, __m512 p3) {
  const __m512 h = hadd512(hadd512(p0, p1), hadd512(p2, p3));
  const __m512 t = _mm512_add_ps(h, _mm512_shuffle_f32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps256(_mm512_shuffle_f32x4(t, t, _MM_SHUFFLE(2, 0, 2, 0)));
}

// The cells of list entries i .. i+7; past n the last one repeats (computed, never stored).
inline void batch_cells(const int32_t* cells, int64_t i, int64_t n, int64_t* c) {
  for (int j = 0; j < kCells; ++j) {
    const int64_t e = std::min(i + j, n - 1);
    c[j] = cells ? cells[e] : e;
  }
}

// fp16 → f32 is exact: F16C equals fp16_to_fp32 for every scale kv_quantize writes.
inline __m256 scales8(const uint16_t* s, const int64_t* c, int64_t stride) {
  alignas(16) uint16_t v[kCells];
  for (int j = 0; j < kCells; ++j) v[j] = s[c[j] * stride];
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(v)));
}

inline void store8(__m256 v, float* p, int64_t cnt) {
  if (cnt >= kCells) {
    _mm256_storeu_ps(p, v);
    return;
  }
  alignas(32) float t[kCells];
  _mm256_store_ps(t, v);
  for (int64_t j = 0; j < cnt; ++j) p[j] = t[j];
}

template <int G>
void scores_i8_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                 float* scores, int64_t stride) {
  const int dh = h.dh;
  const int64_t nb = dh / kKvBlock;
  const __m256 vsq = _mm256_set1_ps(sqrt_dh);
  for (int64_t i = 0; i < n; i += kCells) {
    int64_t c[kCells];
    batch_cells(cells, i, n, c);
    const int8_t* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = h.k8 + c[j] * dh;
    __m256 tot[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) tot[g] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m512 acc[4][G];
      pair_dots<int8_t, G>(q, k, b * kKvBlock, kKvBlock, acc);
      const __m256 s = scales8(h.ks + b, c, nb);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g)
        tot[g] = _mm256_add_ps(tot[g], _mm256_mul_ps(reduce8(acc[0][g], acc[1][g], acc[2][g], acc[3][g]), s));
    }
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) store8(_mm256_div_ps(tot[g], vsq), scores + g * stride + i, n - i);
  }
}

void scores_i8_avx512(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                      float* scores, int64_t stride) {
  if (h.dh % kKvBlock != 0) {
    kEightLane.scores_i8(h, q, G, cells, n, sqrt_dh, scores, stride);
    return;
  }
  for (int g0 = 0; g0 < G; g0 += kMaxG)
    x86::with_heads<kMaxG>(
        G - g0, [&](auto gs) { scores_i8_g<gs.value>(h, q + g0, cells, n, sqrt_dh, scores + g0 * stride, stride); });
}

// Columns [col, col + 16·NV) of the G outputs summed in registers over a piece's cells (per element
// and cell one multiply and one add for int8 cells, one fused multiply-add for f32 / fp16; cells in
// order; from +0 on the first piece, from the stored sums after it). w[g·kPiece + i] is cell i's
// weight. ahead_bytes > 0: also asks for that many bytes from col on of the cell
// x86::kPrefetchCells ahead (the distance at which the 8-lane kernels ask for K rows).
template <typename T, int G, int NV>
void values_slab(const T* base, int dh, const float* w, const int32_t* cells, int64_t n, int col, bool first,
                 float* const* co, int64_t ahead_bytes) {
  constexpr int64_t kAhead = x86::kPrefetchCells;
  __m512 acc[G][NV];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[g][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(co[g] + col + 16 * v);
  base += col;
  for (int64_t i = 0; i < n; ++i) {
    const T* x = base + (cells ? cells[i] : i) * dh;
    if (ahead_bytes > 0 && i + kAhead < n)
      x86::prefetch_span(base + (cells ? cells[i + kAhead] : i + kAhead) * dh, ahead_bytes);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const __m512 xv = load16(x + 16 * v);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc[g][v] = mul_add<x86::kFused<T>>(acc[g][v], _mm512_set1_ps(w[g * kPiece + i]), xv);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(co[g] + col + 16 * v, acc[g][v]);
}

template <int G>
void values_g(const KvHeadData& h, const float* e, int64_t es, const int32_t* cells, int64_t n, float* const* co) {
  const int dh = h.dh;
  const int64_t nb = dh / kKvBlock;
  alignas(64) float w[G * kPiece];
  for (int64_t p0 = 0; p0 < n; p0 += kPiece) {
    const int64_t pn = std::min<int64_t>(kPiece, n - p0);
    const int32_t* pc = cells ? cells + p0 : nullptr;
    const int8_t* pb = cells ? h.v8 : h.v8 + p0 * dh;
    const uint16_t* vs = cells ? h.vs : h.vs + p0 * nb;
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t i = 0; i < pn; ++i) {
        const float s = fp16_to_fp32(vs[(pc ? pc[i] : i) * nb + b]);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) w[g * kPiece + i] = e[g * es + p0 + i] * s;
      }
      values_slab<int8_t, G, 4>(pb, dh, w, pc, pn, static_cast<int>(b * kKvBlock), p0 == 0, co, 0);
    }
  }
}

void values_i8_avx512(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n,
                      float* const* co) {
  if (h.dh % kKvBlock != 0 || n <= 0) {
    kEightLane.values_i8(h, e, es, G, cells, n, co);
    return;
  }
  for (int g0 = 0; g0 < G; g0 += kMaxG)
    x86::with_heads<kMaxG>(G - g0, [&](auto gs) { values_g<gs.value>(h, e + g0 * es, es, cells, n, co + g0); });
}

// f32 and fp16 cells (T = float / uint16_t) on 16 lanes: the 8-lane kernels' per-lane operations
// (engine/x86/attention_kernels_x86.h: 8 interleaved dot sums per cell and head over the whole head,
// reduced by the hadd tree; one fused multiply-add per element and cell in both), so bitwise the
// same. Scores: batches of eight cells, two cells' sums in one zmm as the int8 kernel's; values:
// 16-column registers. Passes of four query heads (a Qwen3-style GQA group reads each K and V line
// once). Dh a multiple of 8 (scores) / 16 (values); other shapes run the 8-lane kernels.
constexpr int kMaxGF = 4;

template <typename T, int G>
void scores_f_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                float* scores, int64_t stride, bool ask_ahead) {
  const int dh = h.dh;
  const __m256 vsq = _mm256_set1_ps(sqrt_dh);
  const T* keys = x86::keys_of<T>(h);
  const T* vals = x86::values_of<T>(h);
  // K rows one batch of eight cells ahead, and V rows with them while they fit kPrefetchValuesMaxBytes (the
  // 8-lane kernels ask for V rows through KvHeadData::ahead_* instead).
  const bool ask_v = ask_ahead && x86::ask_values_too(vals, n, int64_t{sizeof(T)} * dh);
  for (int64_t i = 0; i < n; i += kCells) {
    int64_t c[kCells];
    batch_cells(cells, i, n, c);
    const T* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = keys + c[j] * dh;
    if (ask_ahead) x86::prefetch_rows(keys, vals, ask_v, cells, i + kCells, std::min(n, i + 2 * kCells), dh);
    __m512 acc[4][G];
    pair_dots<T, G>(q, k, 0, dh, acc);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g)
      store8(_mm256_div_ps(reduce8(acc[0][g], acc[1][g], acc[2][g], acc[3][g]), vsq), scores + g * stride + i, n - i);
  }
}

template <typename T>
void scores_f_avx512(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                     float* scores, int64_t stride) {
  if (h.dh % 8 != 0) {
    (std::is_same_v<T, float> ? kEightLane.scores_f32 : kEightLane.scores_f16)(h, q, G, cells, n, sqrt_dh, scores,
                                                                               stride);
    return;
  }
  // Only the first pass asks for cells ahead; the later ones find them in cache.
  for (int g0 = 0; g0 < G; g0 += kMaxGF)
    x86::with_heads<kMaxGF>(G - g0, [&](auto gs) {
      scores_f_g<T, gs.value>(h, q + g0, cells, n, sqrt_dh, scores + g0 * stride, stride, g0 == 0);
    });
}

template <typename T, int G>
void values_f_g(const KvHeadData& h, const float* e, int64_t es, const int32_t* cells, int64_t n, float* const* co,
                bool ask_ahead) {
  constexpr int NV = x86::slab_width<G, /*Regs=*/32>();
  const int dh = h.dh;
  const T* base = x86::values_of<T>(h);
  // The first slab asks for the whole row of the cells ahead; the later slabs find it in cache.
  const int64_t ahead = ask_ahead ? int64_t{sizeof(T)} * dh : 0;
  alignas(64) float w[G * kPiece];
  for (int64_t p0 = 0; p0 < n; p0 += kPiece) {
    const int64_t pn = std::min<int64_t>(kPiece, n - p0);
    const int32_t* pc = cells ? cells + p0 : nullptr;
    const T* pb = cells ? base : base + p0 * dh;
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g)
      for (int64_t i = 0; i < pn; ++i) w[g * kPiece + i] = e[g * es + p0 + i];
    int col = 0;
    for (; col + 16 * NV <= dh; col += 16 * NV)
      values_slab<T, G, NV>(pb, dh, w, pc, pn, col, p0 == 0, co, col == 0 ? ahead : 0);
    for (; col < dh; col += 16) values_slab<T, G, 1>(pb, dh, w, pc, pn, col, p0 == 0, co, col == 0 ? ahead : 0);
  }
}

template <typename T>
void values_f_avx512(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n,
                     float* const* co) {
  if (h.dh % 16 != 0 || n <= 0) {
    (std::is_same_v<T, float> ? kEightLane.values_f32 : kEightLane.values_f16)(h, e, es, G, cells, n, co);
    return;
  }
  for (int g0 = 0; g0 < G; g0 += kMaxGF)
    x86::with_heads<kMaxGF>(G - g0,
                            [&](auto gs) { values_f_g<T, gs.value>(h, e + g0 * es, es, cells, n, co + g0, g0 == 0); });
}

const AttnKernels kAvx512{scores_i8_avx512,         scores_f_avx512<float>,    values_i8_avx512,
                          values_f_avx512<float>,   scores_f_avx512<uint16_t>, values_f_avx512<uint16_t>,
                          kEightLane.indexer_scores};

}  // namespace

const AttnKernels& attn_kernels_avx512() { return kAvx512; }

}  // namespace strata::engine
