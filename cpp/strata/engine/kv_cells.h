#pragma once
// K/V storage of the main model (or of the MTP block) indexed by cell id. In this single-sequence
// engine cell id = absolute position. Per layer and cell, each KV head holds Dh keys and Dh values:
// int8 with one fp16 scale per 64 elements (strata), f32 (qwen3moe's default) or fp16 (the kv_type
// setting; values rounded to nearest even, read back exactly); indexer keys, when the
// model has an indexer, are kept per cell in f32. Allocated once for n_cells (pages committed as
// cells get used); nothing per token.
#include <cstdint>

#include "strata/engine/attention_kernels.h"
#include "strata/engine/kv_quant.h"
#include "strata/model/hparams.h"
#include "strata/util/aligned.h"
#include "strata/quant/dequantize.h"

namespace strata::engine {

// fp16 cells are for heads of at most this many elements (the per-cell reference converts a row on
// the stack); KvCells refuses larger heads with kv_type f16.
constexpr int kMaxF16HeadDim = 1024;

class KvCells {
 public:
  KvCells(int n_layer, int64_t n_cells, int n_head_kv, int head_dim, model::KvType type, int indexer_dim);

  int64_t n_cells() const { return n_cells_; }
  int head_dim() const { return dh_; }
  model::KvType type() const { return type_; }
  std::size_t bytes() const;

  // Before writing cells [c0, c0 + n) of a layer (single-threaded, ahead of the parallel writes):
  // cells between the layer's high-water mark and c0 that nobody wrote are zeroed, so every cell
  // below the mark reads as written data or zeros — never garbage — while memory beyond the mark
  // stays untouched (not committed) until used.
  void prepare_write(int layer, int64_t c0, int64_t n);
  // Stores the (normed, rotated) keys and values of all KV heads of one row: k, v are [Hkv·Dh].
  // The cell must lie in a range announced by prepare_write.
  void write(int layer, int64_t cell, const float* k, const float* v);

  // q · k̂ of one head of one cell (k̂ the stored key as the attention reads it): the per-cell
  // formulation the attention kernels reproduce (tests use it as their reference).
  float dot_k(const VecKernels& vk, int layer, int64_t cell, int head, const float* q) const {
    const std::size_t h = slot(layer, cell, head);
    if (type_ == model::KvType::Int8) return kv_dot(vk, q, &k8_[h * dh_], &ks_[h * nb_], dh_);
    if (type_ == model::KvType::F16) {
      float k[kMaxF16HeadDim];
      quant::dequantize_row(quant::GGMLType::F16, &kh_[h * dh_], k, dh_);
      return vk.dot_f32_fused(q, k, dh_);
    }
    return vk.dot_f32_fused(q, &kf_[h * dh_], dh_);
  }
  // out += w · v̂ of one head of one cell.
  void axpy_v(const VecKernels& vk, int layer, int64_t cell, int head, float w, float* out) const {
    const std::size_t h = slot(layer, cell, head);
    if (type_ == model::KvType::Int8) {
      kv_axpy(vk, w, &v8_[h * dh_], &vs_[h * nb_], dh_, out);
    } else if (type_ == model::KvType::F16) {
      float v[kMaxF16HeadDim];
      quant::dequantize_row(quant::GGMLType::F16, &vh_[h * dh_], v, dh_);
      vk.axpy_f32_fused(w, v, dh_, out);
    } else {
      vk.axpy_f32_fused(w, &vf_[h * dh_], dh_, out);
    }
  }
  // One KV head's storage for the many-cell attention kernels (engine/attention_kernels.h).
  KvHeadData head_data(int layer, int head) const {
    const std::size_t h = slot(layer, 0, head);
    KvHeadData d;
    d.dh = dh_;
    if (type_ == model::KvType::Int8) {
      d.k8 = k8_.data() + h * dh_;
      d.v8 = v8_.data() + h * dh_;
      d.ks = ks_.data() + h * nb_;
      d.vs = vs_.data() + h * nb_;
    } else if (type_ == model::KvType::F16) {
      d.kh = kh_.data() + h * dh_;
      d.vh = vh_.data() + h * dh_;
    } else {
      d.kf = kf_.data() + h * dh_;
      d.vf = vf_.data() + h * dh_;
    }
    return d;
  }
  // The stored key / value of one head as floats (tests, debugging).
  void read_k(int layer, int64_t cell, int head, float* out) const;
  void read_v(int layer, int64_t cell, int head, float* out) const;

  bool has_indexer() const { return di_ > 0; }
  int indexer_dim() const { return di_; }
  float* indexer_key(int layer, int64_t cell) {
    return &ik_[(static_cast<std::size_t>(layer) * n_cells_ + static_cast<std::size_t>(cell)) * di_];
  }
  const float* indexer_key(int layer, int64_t cell) const {
    return &ik_[(static_cast<std::size_t>(layer) * n_cells_ + static_cast<std::size_t>(cell)) * di_];
  }

 private:
  // Head-major within a layer: one head's cells are contiguous, so attention over a head's cells
  // is one sequential read (cell-major put the other heads' vectors between consecutive cells and
  // the reads missed the prefetchers: attention took 43 % of a decode step at 800 cells).
  std::size_t slot(int layer, int64_t cell, int head) const {
    return (static_cast<std::size_t>(layer) * hkv_ + static_cast<std::size_t>(head)) *
               static_cast<std::size_t>(n_cells_) +
           static_cast<std::size_t>(cell);
  }

  void zero_cells(int layer, int64_t c0, int64_t c1);

  int n_layer_;
  int64_t n_cells_;
  int hkv_, dh_, nb_, di_;
  model::KvType type_;
  AlignedBuffer<int8_t> k8_, v8_;
  AlignedBuffer<uint16_t> ks_, vs_;
  AlignedBuffer<float> kf_, vf_;
  AlignedBuffer<uint16_t> kh_, vh_;  // fp16 cells
  AlignedBuffer<float> ik_;
  AlignedBuffer<int64_t> high_water_;  // [n_layer] 1 + the highest cell written or zeroed
};

}  // namespace strata::engine
