#include "strata/engine/kv_cells.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "strata/engine/vec_dot.h"
#include "strata/util/error.h"

namespace strata::engine {
namespace {

// a * b with a clear error instead of a wrap-around or a huge allocation.
std::size_t mul_checked(std::size_t a, std::size_t b, const char* what) {
  constexpr std::size_t kLimit = std::size_t{1} << 40;  // 1 TiB: far beyond any sane cache
  if (a != 0 && b > kLimit / a)
    throw_error(ErrorKind::Value, std::string("KV cells: ") + what + " size overflows (reduce max_ctx)");
  return a * b;
}

}  // namespace

KvCells::KvCells(int n_layer, int64_t n_cells, int n_head_kv, int head_dim, model::KvType type, int indexer_dim)
    : n_layer_(n_layer),
      n_cells_(n_cells),
      hkv_(n_head_kv),
      dh_(head_dim),
      nb_(kv_blocks(head_dim)),
      di_(indexer_dim),
      type_(type) {
  if (n_layer <= 0 || n_cells <= 0 || n_head_kv <= 0 || head_dim <= 0 || indexer_dim < 0)
    throw_error(ErrorKind::Value, "KV cells: invalid geometry");
  const std::size_t heads =
      mul_checked(mul_checked(static_cast<std::size_t>(n_layer), static_cast<std::size_t>(n_cells), "cell"),
                  static_cast<std::size_t>(n_head_kv), "head");
  const std::size_t elems = mul_checked(heads, static_cast<std::size_t>(head_dim), "element");
  if (type == model::KvType::Int8) {
    k8_.resize(elems);
    v8_.resize(elems);
    ks_.resize(mul_checked(heads, static_cast<std::size_t>(nb_), "scale"));
    vs_.resize(ks_.size());
  } else if (type == model::KvType::F16) {
    if (head_dim > kMaxF16HeadDim)
      throw_error(ErrorKind::Value, "KV cells: kv_type f16 supports heads of at most " +
                                        std::to_string(kMaxF16HeadDim) +
                                        " elements (this model's: " + std::to_string(head_dim) + ")");
    kh_.resize(elems);
    vh_.resize(elems);
  } else {
    kf_.resize(elems);
    vf_.resize(elems);
  }
  if (di_ > 0)
    ik_.resize(mul_checked(mul_checked(static_cast<std::size_t>(n_layer), static_cast<std::size_t>(n_cells), "cell"),
                           static_cast<std::size_t>(di_), "indexer"));
  high_water_.resize(static_cast<std::size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) high_water_[static_cast<std::size_t>(l)] = 0;
}

std::size_t KvCells::bytes() const {
  return k8_.capacity() + v8_.capacity() + 2 * (ks_.capacity() + vs_.capacity() + kh_.capacity() + vh_.capacity()) +
         4 * (kf_.capacity() + vf_.capacity() + ik_.capacity());
}

void KvCells::zero_cells(int layer, int64_t c0, int64_t c1) {
  if (c1 <= c0) return;
  for (int h = 0; h < hkv_; ++h) {
    const std::size_t s0 = slot(layer, c0, h), n = static_cast<std::size_t>(c1 - c0);
    if (type_ == model::KvType::Int8) {
      std::memset(&k8_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_));
      std::memset(&v8_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_));
      std::memset(&ks_[s0 * nb_], 0, n * static_cast<std::size_t>(nb_) * sizeof(uint16_t));
      std::memset(&vs_[s0 * nb_], 0, n * static_cast<std::size_t>(nb_) * sizeof(uint16_t));
    } else if (type_ == model::KvType::F16) {
      std::memset(&kh_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_) * sizeof(uint16_t));
      std::memset(&vh_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_) * sizeof(uint16_t));
    } else {
      std::memset(&kf_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_) * sizeof(float));
      std::memset(&vf_[s0 * dh_], 0, n * static_cast<std::size_t>(dh_) * sizeof(float));
    }
  }
  if (di_ > 0) std::memset(indexer_key(layer, c0), 0, static_cast<std::size_t>(c1 - c0) * di_ * sizeof(float));
}

void KvCells::prepare_write(int layer, int64_t c0, int64_t n) {
  if (layer < 0 || layer >= n_layer_ || c0 < 0 || n < 0 || c0 + n > n_cells_)
    throw_error(ErrorKind::Internal, "KvCells::prepare_write: cells [" + std::to_string(c0) + ", " +
                                         std::to_string(c0 + n) + ") outside the store");
  int64_t& hw = high_water_[static_cast<std::size_t>(layer)];
  if (c0 > hw) zero_cells(layer, hw, c0);
  hw = std::max(hw, c0 + n);
}

void KvCells::write(int layer, int64_t cell, const float* k, const float* v) {
  const VecKernels& vk = vec_kernels();
  for (int h = 0; h < hkv_; ++h) {
    const std::size_t s = slot(layer, cell, h);
    if (type_ == model::KvType::Int8) {
      kv_quantize(k + h * dh_, dh_, &k8_[s * dh_], &ks_[s * nb_]);
      kv_quantize(v + h * dh_, dh_, &v8_[s * dh_], &vs_[s * nb_]);
    } else if (type_ == model::KvType::F16) {
      // fp32_to_fp16's rule on the ISA's vectors (a scalar loop was 0.5 % of a decode step).
      vk.to_fp16(k + h * dh_, &kh_[s * dh_], dh_);
      vk.to_fp16(v + h * dh_, &vh_[s * dh_], dh_);
    } else {
      std::memcpy(&kf_[s * dh_], k + h * dh_, sizeof(float) * static_cast<std::size_t>(dh_));
      std::memcpy(&vf_[s * dh_], v + h * dh_, sizeof(float) * static_cast<std::size_t>(dh_));
    }
  }
}

void KvCells::read_k(int layer, int64_t cell, int head, float* out) const {
  const std::size_t s = slot(layer, cell, head);
  if (type_ == model::KvType::Int8)
    kv_dequantize(&k8_[s * dh_], &ks_[s * nb_], dh_, out);
  else if (type_ == model::KvType::F16)
    quant::dequantize_row(quant::GGMLType::F16, &kh_[s * dh_], out, dh_);
  else
    std::memcpy(out, &kf_[s * dh_], sizeof(float) * static_cast<std::size_t>(dh_));
}

void KvCells::read_v(int layer, int64_t cell, int head, float* out) const {
  const std::size_t s = slot(layer, cell, head);
  if (type_ == model::KvType::Int8)
    kv_dequantize(&v8_[s * dh_], &vs_[s * nb_], dh_, out);
  else if (type_ == model::KvType::F16)
    quant::dequantize_row(quant::GGMLType::F16, &vh_[s * dh_], out, dh_);
  else
    std::memcpy(out, &vf_[s * dh_], sizeof(float) * static_cast<std::size_t>(dh_));
}

}  // namespace strata::engine
