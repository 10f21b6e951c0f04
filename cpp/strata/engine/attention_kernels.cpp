// The portable attention-core kernels: literally the per-cell formulation (kv_dot / kv_axpy for int8
// cells, dot_f32_fused / axpy_f32_fused for f32 and fp16 cells, indexer_score, with the portable vec
// kernels), the reference the AVX2 and AVX-512 tables must equal bit for bit.
#include "strata/engine/attention_kernels.h"

#include <cstring>

#include "strata/cpu/features.h"
#include "strata/engine/cell_select.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/kv_quant.h"
#include "strata/engine/vec_dot.h"
#include "strata/quant/dequantize.h"

namespace strata::engine {
namespace {

inline int64_t cell_at(const int32_t* cells, int64_t i) { return cells ? cells[i] : i; }

void scores_i8_scalar(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                      float* scores, int64_t stride) {
  const VecKernels& vk = vec_kernels_scalar();
  const int64_t nb = kv_blocks(h.dh);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = cell_at(cells, i);
    for (int g = 0; g < G; ++g)
      scores[g * stride + i] = kv_dot(vk, q[g], h.k8 + c * h.dh, h.ks + c * nb, h.dh) / sqrt_dh;
  }
}

void scores_f32_scalar(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n,
                       float sqrt_dh, float* scores, int64_t stride) {
  const VecKernels& vk = vec_kernels_scalar();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = cell_at(cells, i);
    for (int g = 0; g < G; ++g) scores[g * stride + i] = vk.dot_f32_fused(q[g], h.kf + c * h.dh, h.dh) / sqrt_dh;
  }
}

void values_i8_scalar(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                      float* const* co) {
  const VecKernels& vk = vec_kernels_scalar();
  const int64_t nb = kv_blocks(h.dh);
  for (int g = 0; g < G; ++g) std::memset(co[g], 0, sizeof(float) * static_cast<std::size_t>(h.dh));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = cell_at(cells, i);
    for (int g = 0; g < G; ++g) kv_axpy(vk, e[g * estride + i], h.v8 + c * h.dh, h.vs + c * nb, h.dh, co[g]);
  }
}

void values_f32_scalar(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                       float* const* co) {
  const VecKernels& vk = vec_kernels_scalar();
  for (int g = 0; g < G; ++g) std::memset(co[g], 0, sizeof(float) * static_cast<std::size_t>(h.dh));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = cell_at(cells, i);
    for (int g = 0; g < G; ++g) vk.axpy_f32_fused(e[g * estride + i], h.vf + c * h.dh, h.dh, co[g]);
  }
}

// fp16 cells: each row converted (exactly) on the stack, then the f32 formulation.
void scores_f16_scalar(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n,
                       float sqrt_dh, float* scores, int64_t stride) {
  const VecKernels& vk = vec_kernels_scalar();
  float k[kMaxF16HeadDim];
  for (int64_t i = 0; i < n; ++i) {
    quant::dequantize_row(quant::GGMLType::F16, h.kh + cell_at(cells, i) * h.dh, k, h.dh);
    for (int g = 0; g < G; ++g) scores[g * stride + i] = vk.dot_f32_fused(q[g], k, h.dh) / sqrt_dh;
  }
}

void values_f16_scalar(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                       float* const* co) {
  const VecKernels& vk = vec_kernels_scalar();
  float v[kMaxF16HeadDim];
  for (int g = 0; g < G; ++g) std::memset(co[g], 0, sizeof(float) * static_cast<std::size_t>(h.dh));
  for (int64_t i = 0; i < n; ++i) {
    quant::dequantize_row(quant::GGMLType::F16, h.vh + cell_at(cells, i) * h.dh, v, h.dh);
    for (int g = 0; g < G; ++g) vk.axpy_f32_fused(e[g * estride + i], v, h.dh, co[g]);
  }
}

void indexer_scores_scalar(const float* qi, const float* w, int heads, int dim, const float* keys, int64_t n,
                           float* out) {
  const VecKernels& vk = vec_kernels_scalar();
  for (int64_t i = 0; i < n; ++i) out[i] = indexer_score(vk, qi, w, heads, dim, keys + i * dim);
}

const AttnKernels kScalar{scores_i8_scalar,  scores_f32_scalar, values_i8_scalar,     values_f32_scalar,
                          scores_f16_scalar, values_f16_scalar, indexer_scores_scalar};

}  // namespace

const AttnKernels& attn_kernels_scalar() { return kScalar; }

const AttnKernels& attn_kernels() {
#if defined(STRATA_HAVE_AVX512_TU)
  if (cpu::active_isa() == cpu::Isa::Avx512) return attn_kernels_avx512();
#endif
#if defined(STRATA_HAVE_AVX2_TU)
  if (cpu::isa_has_avx2(cpu::active_isa())) return attn_kernels_avx2();
#endif
  return kScalar;
}

}  // namespace strata::engine
