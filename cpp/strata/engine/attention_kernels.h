#pragma once
// The attention core's many-cell kernels: the scores of a GQA group's query heads over a list of
// cells, the value accumulation of one softmax chunk, and the lightning indexer's scores over a run
// of cells. Each result is bitwise the per-cell formulation — KvCells::dot_k / axpy_v (int8 cells,
// engine/kv_quant.h: per 64-block dot_i8 by vec_dot.h's order, out = 0 + part·scale summed over
// blocks; V: w·scale, then one multiply and one add per element and cell; f32 and fp16 cells:
// dot_f32_fused / axpy_f32_fused, one fused multiply-add per element, which halves the arithmetic
// that bounds these kernels) and indexer_score — but a whole list is one call: each cell is
// converted once for the G heads, the dot accumulators of several cells are reduced together, and
// the value accumulators stay in registers across a chunk.
// The portable table is the reference; tests/cpp/test_attention_kernels.cpp checks the AVX2 and
// AVX-512 tables against it.
#include <cstdint>

#include "strata/model/hparams.h"

namespace strata::engine {

// One KV head of one layer as stored by KvCells (head-major: cell c's vector at c·Dh, its int8
// block scales at c·kv_blocks(Dh)). Only the pointers of the store's type are set.
struct KvHeadData {
  const int8_t* k8 = nullptr;
  const int8_t* v8 = nullptr;
  const uint16_t* ks = nullptr;  // fp16 scales
  const uint16_t* vs = nullptr;
  const float* kf = nullptr;
  const float* vf = nullptr;
  const uint16_t* kh = nullptr;  // fp16 cells
  const uint16_t* vh = nullptr;
  int dh = 0;
  // List entries whose V rows a kernel may ask the caches for while it works, spread over its steps (a
  // prefetch never changes a result): [ahead_begin, ahead_begin + ahead_n) of the call's own list (its
  // cells, or the implicit list), which may lie past the call's n. attend_group and attend_rows set them:
  // the score call asks for the first value chunk's rows, each value chunk for the next chunk's.
  int64_t ahead_begin = 0;
  int64_t ahead_n = 0;
};

// h asking for the V rows of list entries [begin, begin + n) (KvHeadData::ahead_*).
inline KvHeadData asking_for(KvHeadData h, int64_t begin, int64_t n) {
  h.ahead_begin = begin;
  h.ahead_n = n;
  return h;
}

struct AttnKernels {
  // scores[g·stride + i] = (q[g] · k̂(cell i)) / sqrt_dh for i in [0, n), G query heads (G <= 16).
  // cell i = cells[i], or i when cells == nullptr.
  void (*scores_i8)(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                    float* scores, int64_t stride);
  void (*scores_f32)(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                     float* scores, int64_t stride);
  // co[g][0..Dh) = Σ_i e[g·estride + i] · v̂(cell i) over i in [0, n), in order from 0 (a softmax
  // chunk's unnormalised output; co need not be initialised).
  void (*values_i8)(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                    float* const* co);
  void (*values_f32)(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                     float* const* co);
  // fp16 cells: the f32 kernels' arithmetic on the exactly converted values (bitwise the f32 kernels
  // over a converted copy).
  void (*scores_f16)(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
                     float* scores, int64_t stride);
  void (*values_f16)(const KvHeadData& h, const float* e, int64_t estride, int G, const int32_t* cells, int64_t n,
                     float* const* co);
  // out[i] = Σ_j w[j]·ReLU(qi[j·dim ..] · keys[i·dim ..]) for i in [0, n), heads j in order
  // (indexer_score of each of n consecutive cells).
  void (*indexer_scores)(const float* qi, const float* w, int heads, int dim, const float* keys, int64_t n, float* out);

  // The score / value entry for cells of `type`.
  auto scores_for(model::KvType type) const {
    return type == model::KvType::Int8 ? scores_i8 : type == model::KvType::F16 ? scores_f16 : scores_f32;
  }
  auto values_for(model::KvType type) const {
    return type == model::KvType::Int8 ? values_i8 : type == model::KvType::F16 ? values_f16 : values_f32;
  }
};

// The kernels of cpu::active_isa().
const AttnKernels& attn_kernels();
const AttnKernels& attn_kernels_scalar();
#if defined(STRATA_HAVE_AVX2_TU)
const AttnKernels& attn_kernels_avx2();
#endif
#if defined(STRATA_HAVE_AVX512_TU)
// 16 lanes for int8 K/V with Dh a multiple of 64 and for f32 / fp16 K/V with Dh a multiple of 8
// (scores) or 16 (values); other shapes and the indexer run the 8-lane kernels of
// engine/x86/attention_kernels_x86.h with 32 ymm registers (passes of four query heads).
const AttnKernels& attn_kernels_avx512();
#endif

}  // namespace strata::engine
