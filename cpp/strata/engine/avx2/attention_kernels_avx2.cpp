// AVX2 versions of engine/attention_kernels.h, bitwise equal to the portable ones: the lanes, the
// reduction tree and the per-block / per-cell operations are vec_dot.h's and kv_quant.h's, with
// multiplies and adds kept separate. What changes is the shape of the work: a batch of four cells
// is converted once for up to three query heads, their twelve 8-lane dot sums are reduced by one
// hadd tree per head, and a softmax chunk's value sums stay in registers across its cells.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "strata/engine/attention_kernels.h"
#include "strata/engine/kv_quant.h"
#include "strata/util/fp16.h"

namespace strata::engine {
namespace {

constexpr int kCells = 4;  // cells whose dots one hadd tree reduces
constexpr int kMaxG = 3;   // heads per pass: kCells·G accumulators and G query chunks fill the 16 ymm

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const int8_t* q) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

inline __m256i tail_mask(int t) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(t), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// Elements [0, t) of p (t < 8), zeros above; never reads past p + t.
inline __m256 load_tail(const float* p, int, __m256i mask) { return _mm256_maskload_ps(p, mask); }
inline __m256 load_tail(const int8_t* p, int t, __m256i) {
  int8_t buf[8] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(t));
  return load8(buf);
}

// Lane c = ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) of a_c: hadd(a0, a1) holds a0's and a1's pair sums,
// the second hadd their quad sums (low 128 bits: lanes 0-3, high: lanes 4-7), the add the total.
inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Lane c of out[g] = vec_dot.h's dot of q[g][o, o+len) with k[c][o, o+len): 8 interleaved sums,
// the tail continuing lanes 0, 1, ... (the other lanes get +0 products, which leave them unchanged:
// a sum that starts at +0 is never −0).
template <typename T, int G>
inline void dots4(const float* const* q, const T* const* k, int64_t o, int len, __m128* out) {
  __m256 acc[kCells][G];
  for (int c = 0; c < kCells; ++c)
    for (int g = 0; g < G; ++g) acc[c][g] = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= len; j += 8) {
    __m256 qv[G];
    for (int g = 0; g < G; ++g) qv[g] = _mm256_loadu_ps(q[g] + o + j);
    for (int c = 0; c < kCells; ++c) {
      const __m256 kv = load8(k[c] + o + j);
      for (int g = 0; g < G; ++g) acc[c][g] = _mm256_add_ps(acc[c][g], _mm256_mul_ps(qv[g], kv));
    }
  }
  if (j < len) {
    const int t = len - j;
    const __m256i m = tail_mask(t);
    __m256 qv[G];
    for (int g = 0; g < G; ++g) qv[g] = _mm256_maskload_ps(q[g] + o + j, m);
    for (int c = 0; c < kCells; ++c) {
      const __m256 kv = load_tail(k[c] + o + j, t, m);
      for (int g = 0; g < G; ++g) acc[c][g] = _mm256_add_ps(acc[c][g], _mm256_mul_ps(qv[g], kv));
    }
  }
  for (int g = 0; g < G; ++g) out[g] = reduce4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]);
}

// The kCells cells from list entry i on; past n the last one repeats (computed, never stored).
inline void batch_cells(const int32_t* cells, int64_t i, int64_t n, int64_t* c) {
  for (int j = 0; j < kCells; ++j) {
    const int64_t e = std::min(i + j, n - 1);
    c[j] = cells ? cells[e] : e;
  }
}

inline void store4(__m128 v, float* p, int64_t cnt) {
  if (cnt >= kCells) {
    _mm_storeu_ps(p, v);
    return;
  }
  alignas(16) float t[kCells];
  _mm_store_ps(t, v);
  for (int64_t j = 0; j < cnt; ++j) p[j] = t[j];
}

template <int G>
void scores_i8_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                 float* scores, int64_t stride) {
  const int dh = h.dh;
  const int64_t nb = kv_blocks(dh);
  const __m128 vsq = _mm_set1_ps(sqrt_dh);
  for (int64_t i = 0; i < n; i += kCells) {
    int64_t c[kCells];
    batch_cells(cells, i, n, c);
    const int8_t* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = h.k8 + c[j] * dh;
    __m128 tot[G];
    for (int g = 0; g < G; ++g) tot[g] = _mm_setzero_ps();
    for (int b0 = 0, b = 0; b0 < dh; b0 += kKvBlock, ++b) {
      __m128 part[G];
      dots4<int8_t, G>(q, k, b0, std::min(dh - b0, kKvBlock), part);
      const __m128 s = _mm_setr_ps(fp16_to_fp32(h.ks[c[0] * nb + b]), fp16_to_fp32(h.ks[c[1] * nb + b]),
                                   fp16_to_fp32(h.ks[c[2] * nb + b]), fp16_to_fp32(h.ks[c[3] * nb + b]));
      for (int g = 0; g < G; ++g) tot[g] = _mm_add_ps(tot[g], _mm_mul_ps(part[g], s));
    }
    for (int g = 0; g < G; ++g) store4(_mm_div_ps(tot[g], vsq), scores + g * stride + i, n - i);
  }
}

template <int G>
void scores_f32_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                  float* scores, int64_t stride) {
  const int dh = h.dh;
  const __m128 vsq = _mm_set1_ps(sqrt_dh);
  for (int64_t i = 0; i < n; i += kCells) {
    int64_t c[kCells];
    batch_cells(cells, i, n, c);
    const float* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = h.kf + c[j] * dh;
    __m128 part[G];
    dots4<float, G>(q, k, 0, dh, part);
    for (int g = 0; g < G; ++g) store4(_mm_div_ps(part[g], vsq), scores + g * stride + i, n - i);
  }
}

// G > kMaxG: passes of kMaxG heads (each head's scores and outputs are independent of the others').
void scores_i8_avx2(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                    float* scores, int64_t stride) {
  for (int g0 = 0; g0 < G; g0 += kMaxG) {
    const float* const* qg = q + g0;
    float* sg = scores + g0 * stride;
    switch (std::min(kMaxG, G - g0)) {
      case 3: scores_i8_g<3>(h, qg, cells, n, sqrt_dh, sg, stride); break;
      case 2: scores_i8_g<2>(h, qg, cells, n, sqrt_dh, sg, stride); break;
      default: scores_i8_g<1>(h, qg, cells, n, sqrt_dh, sg, stride); break;
    }
  }
}

void scores_f32_avx2(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                     float* scores, int64_t stride) {
  for (int g0 = 0; g0 < G; g0 += kMaxG) {
    const float* const* qg = q + g0;
    float* sg = scores + g0 * stride;
    switch (std::min(kMaxG, G - g0)) {
      case 3: scores_f32_g<3>(h, qg, cells, n, sqrt_dh, sg, stride); break;
      case 2: scores_f32_g<2>(h, qg, cells, n, sqrt_dh, sg, stride); break;
      default: scores_f32_g<1>(h, qg, cells, n, sqrt_dh, sg, stride); break;
    }
  }
}

template <typename T>
const T* values_of(const KvHeadData& h) {
  if constexpr (std::is_same_v<T, int8_t>)
    return h.v8;
  else
    return h.vf;
}

// A cell's weight for the columns of block b: kv_axpy's w·scale (int8), w itself (f32).
template <typename T>
inline float cell_weight(const KvHeadData& h, int64_t nb, float e, int64_t c, int b) {
  if constexpr (std::is_same_v<T, int8_t>)
    return e * fp16_to_fp32(h.vs[c * nb + b]);
  else
    return e;
}

// Columns [col, col + 8·NV) of the G chunk outputs (inside one 64-block), summed in registers over
// the n cells: per element and cell one multiply and one add, cells in order, from +0 (the memset
// then axpy of the per-cell form).
template <typename T, int G, int NV>
void values_slab(const KvHeadData& h, const float* e, int64_t es, const int32_t* cells, int64_t n, int col,
                 float* const* co) {
  const int dh = h.dh;
  const int64_t nb = kv_blocks(dh);
  const int b = col / kKvBlock;
  const T* base = values_of<T>(h) + col;
  __m256 acc[G][NV];
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = cells ? cells[i] : i;
    const T* x = base + c * dh;
    __m256 w[G];
    for (int g = 0; g < G; ++g) w[g] = _mm256_set1_ps(cell_weight<T>(h, nb, e[g * es + i], c, b));
    for (int v = 0; v < NV; ++v) {
      const __m256 xv = load8(x + 8 * v);
      for (int g = 0; g < G; ++g) acc[g][v] = _mm256_add_ps(acc[g][v], _mm256_mul_ps(w[g], xv));
    }
  }
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(co[g] + col + 8 * v, acc[g][v]);
}

// The Dh % 8 columns past the last full 8: one element at a time, the same operations.
template <typename T>
void values_tail(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n, int col0,
                 float* const* co) {
  const int dh = h.dh;
  const int64_t nb = kv_blocks(dh);
  const T* base = values_of<T>(h);
  for (int col = col0; col < dh; ++col)
    for (int g = 0; g < G; ++g) {
      float a = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = cells ? cells[i] : i;
        const float p =
            cell_weight<T>(h, nb, e[g * es + i], c, col / kKvBlock) * static_cast<float>(base[c * dh + col]);
        a = a + p;
      }
      co[g][col] = a;
    }
}

// Slabs as wide as the registers allow (G·NV accumulators + G weights + 1 value); 8·NV divides 64,
// so a slab never straddles two scale blocks.
template <typename T, int G>
void values_g(const KvHeadData& h, const float* e, int64_t es, const int32_t* cells, int64_t n, float* const* co) {
  constexpr int NV = G == 1 ? 8 : G == 2 ? 4 : 2;
  const int dh8 = h.dh / 8 * 8;
  int col = 0;
  for (; col + 8 * NV <= dh8; col += 8 * NV) values_slab<T, G, NV>(h, e, es, cells, n, col, co);
  for (; col + 8 <= dh8; col += 8) values_slab<T, G, 1>(h, e, es, cells, n, col, co);
  values_tail<T>(h, e, es, G, cells, n, dh8, co);
}

template <typename T>
void values_avx2(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n,
                 float* const* co) {
  for (int g0 = 0; g0 < G; g0 += kMaxG) {
    const float* eg = e + g0 * es;
    float* const* cg = co + g0;
    switch (std::min(kMaxG, G - g0)) {
      case 3: values_g<T, 3>(h, eg, es, cells, n, cg); break;
      case 2: values_g<T, 2>(h, eg, es, cells, n, cg); break;
      default: values_g<T, 1>(h, eg, es, cells, n, cg); break;
    }
  }
}

void values_i8_avx2(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n,
                    float* const* co) {
  values_avx2<int8_t>(h, e, es, G, cells, n, co);
}
void values_f32_avx2(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n,
                     float* const* co) {
  values_avx2<float>(h, e, es, G, cells, n, co);
}

// indexer_score per cell: the heads' dots in passes of kMaxG over four cells at a time, then
// total = total + w_j·ReLU(dot_j) in head order (ReLU: dot > 0 ? dot : +0, NaN to +0).
void indexer_scores_avx2(const float* qi, const float* w, int heads, int dim, const float* keys, int64_t n,
                         float* out) {
  const __m128 zero = _mm_setzero_ps();
  for (int64_t i = 0; i < n; i += kCells) {
    const float* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = keys + std::min(i + j, n - 1) * dim;
    __m128 tot = zero;
    for (int j0 = 0; j0 < heads; j0 += kMaxG) {
      const int gs = std::min(kMaxG, heads - j0);
      const float* q[kMaxG];
      for (int g = 0; g < gs; ++g) q[g] = qi + static_cast<int64_t>(j0 + g) * dim;
      __m128 d[kMaxG];
      switch (gs) {
        case 3: dots4<float, 3>(q, k, 0, dim, d); break;
        case 2: dots4<float, 2>(q, k, 0, dim, d); break;
        default: dots4<float, 1>(q, k, 0, dim, d); break;
      }
      for (int g = 0; g < gs; ++g) {
        const __m128 relu = _mm_and_ps(d[g], _mm_cmpgt_ps(d[g], zero));
        tot = _mm_add_ps(tot, _mm_mul_ps(_mm_set1_ps(w[j0 + g]), relu));
      }
    }
    store4(tot, out + i, n - i);
  }
}

const AttnKernels kAvx2{scores_i8_avx2, scores_f32_avx2, values_i8_avx2, values_f32_avx2, indexer_scores_avx2};

}  // namespace

const AttnKernels& attn_kernels_avx2() { return kAvx2; }

}  // namespace strata::engine
