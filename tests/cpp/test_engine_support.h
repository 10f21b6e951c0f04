#pragma once
// Shared by the engine test binaries: an in-memory ModelSource, a builder of tiny random models of
// the strata / qwen3moe architectures with each feature switchable, and deterministic random data.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "strata/model/model.h"
#include "strata/model/model_source.h"
#include "strata/util/fp16.h"

namespace strata_test {

class MemorySource : public strata::model::ModelSource {
 public:
  const std::string& origin() const override { return origin_; }
  std::optional<uint64_t> find_uint(const std::string& k) const override {
    auto it = u_.find(k);
    return it == u_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  }
  std::optional<float> find_float(const std::string& k) const override {
    auto it = f_.find(k);
    return it == f_.end() ? std::nullopt : std::optional<float>(it->second);
  }
  std::optional<bool> find_bool(const std::string& k) const override {
    auto it = b_.find(k);
    return it == b_.end() ? std::nullopt : std::optional<bool>(it->second);
  }
  std::optional<std::string> find_string(const std::string& k) const override {
    auto it = s_.find(k);
    return it == s_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  std::optional<std::vector<uint32_t>> find_u32_array(const std::string& k) const override {
    auto it = ua_.find(k);
    return it == ua_.end() ? std::nullopt : std::optional<std::vector<uint32_t>>(it->second);
  }
  std::optional<std::vector<float>> find_f32_array(const std::string& k) const override {
    auto it = fa_.find(k);
    return it == fa_.end() ? std::nullopt : std::optional<std::vector<float>>(it->second);
  }
  const strata::model::TensorRef* find_tensor(const std::string& name) const override {
    auto it = t_.find(name);
    return it == t_.end() ? nullptr : &it->second.ref;
  }

  void set_u(const std::string& k, uint64_t v) { u_[k] = v; }
  void set_f(const std::string& k, float v) { f_[k] = v; }
  void set_b(const std::string& k, bool v) { b_[k] = v; }
  void set_s(const std::string& k, const std::string& v) { s_[k] = v; }
  void set_u32_array(const std::string& k, const std::vector<uint32_t>& v) { ua_[k] = v; }
  void set_f32_array(const std::string& k, const std::vector<float>& v) { fa_[k] = v; }
  void erase(const std::string& k) {
    u_.erase(k);
    f_.erase(k);
    b_.erase(k);
    s_.erase(k);
    ua_.erase(k);
    fa_.erase(k);
    t_.erase(k);
  }
  // numpy-order dims; F32 values (converted to F16 when type is F16).
  void add_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v,
               strata::quant::GGMLType type = strata::quant::GGMLType::F32) {
    Stored st;
    std::size_t n = 1;
    for (auto x : dims) n *= static_cast<std::size_t>(x);
    if (type == strata::quant::GGMLType::F16) {
      st.bytes.resize(n * 2 + 64);
      auto* p = reinterpret_cast<uint16_t*>(align(st.bytes.data()));
      for (std::size_t i = 0; i < n; ++i) p[i] = strata::fp32_to_fp16(v[i]);
      st.ref.data = reinterpret_cast<const uint8_t*>(p);
      st.ref.nbytes = n * 2;
    } else {
      st.bytes.resize(n * 4 + 64);
      auto* p = reinterpret_cast<float*>(align(st.bytes.data()));
      std::memcpy(p, v.data(), n * 4);
      st.ref.data = reinterpret_cast<const uint8_t*>(p);
      st.ref.nbytes = n * 4;
    }
    st.ref.name = name;
    st.ref.type = type;
    st.ref.ne.assign(dims.rbegin(), dims.rend());
    t_[name] = std::move(st);
  }
  void add_i32(const std::string& name, const std::vector<int32_t>& v) {
    add_i32(name, {static_cast<int64_t>(v.size())}, v);
  }
  // numpy-order dims.
  void add_i32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int32_t>& v) {
    Stored st;
    st.bytes.resize(v.size() * 4 + 64);
    auto* p = reinterpret_cast<int32_t*>(align(st.bytes.data()));
    std::memcpy(p, v.data(), v.size() * 4);
    st.ref = {name,
              strata::quant::GGMLType::I32,
              {dims.rbegin(), dims.rend()},
              reinterpret_cast<const uint8_t*>(p),
              v.size() * 4};
    t_[name] = std::move(st);
  }
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> out;
    for (auto& kv : t_) out.push_back(kv.first);
    return out;
  }

 private:
  struct Stored {
    std::vector<uint8_t> bytes;
    strata::model::TensorRef ref;
  };
  static uint8_t* align(uint8_t* p) {
    auto v = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<uint8_t*>((v + 63) & ~std::uintptr_t{63});
  }
  std::string origin_ = "<memory>";
  std::map<std::string, uint64_t> u_;
  std::map<std::string, float> f_;
  std::map<std::string, bool> b_;
  std::map<std::string, std::string> s_;
  std::map<std::string, std::vector<uint32_t>> ua_;
  std::map<std::string, std::vector<float>> fa_;
  std::map<std::string, Stored> t_;
};

inline std::vector<float> randn(std::mt19937& g, std::size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(g);
  return v;
}

struct TinyOptions {
  bool qwen3moe = false;
  int d = 32, layers = 2, heads = 4, kv_heads = 2, head_dim = 16, rope_dim = 16, vocab = 61;
  int experts = 6, used = 2, ff = 24, ff_shared = 16;
  int hc = 4, sinkhorn = 3;
  bool gated = true;
  int sink = 2, window = 5, idx_heads = 2, idx_dim = 8, idx_top_k = 3;
  bool mtp = true;
  int mtp_vocab = 23;
  bool mtp_ids_contiguous = false;
  uint32_t seed = 1;
  strata::quant::GGMLType matrix_type = strata::quant::GGMLType::F32;
};

// A random model with the given features; scales keep activations O(1).
inline std::unique_ptr<MemorySource> tiny_source(const TinyOptions& o) {
  auto src = std::make_unique<MemorySource>();
  std::mt19937 g(o.seed);
  const int64_t d = o.d;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    src->add_f32(name, {rows, cols}, randn(g, static_cast<std::size_t>(rows * cols), 1.0f / std::sqrt(float(cols))),
                 o.matrix_type);
  };
  auto norm = [&](const std::string& name, int64_t n) {
    auto v = randn(g, static_cast<std::size_t>(n), 0.1f);
    for (auto& x : v) x += 1.0f;
    src->add_f32(name, {n}, v);
  };
  auto f32 = [&](const std::string& name, const std::vector<int64_t>& dims, float scale) {
    std::size_t n = 1;
    for (auto x : dims) n *= static_cast<std::size_t>(x);
    src->add_f32(name, dims, randn(g, n, scale));
  };
  auto experts = [&](const std::string& name, int64_t e, int64_t rows, int64_t cols) {
    src->add_f32(name, {e, rows, cols},
                 randn(g, static_cast<std::size_t>(e * rows * cols), 1.0f / std::sqrt(float(cols))), o.matrix_type);
  };
  const std::string a = o.qwen3moe ? "qwen3moe." : "strata.";
  src->set_s("general.architecture", o.qwen3moe ? "qwen3moe" : "strata");
  src->set_u(a + "context_length", 4096);
  src->set_u(a + "embedding_length", static_cast<uint64_t>(d));
  const int nextn = (!o.qwen3moe && o.mtp) ? 1 : 0;
  src->set_u(a + "block_count", static_cast<uint64_t>(o.layers + nextn));
  src->set_u(a + "attention.head_count", static_cast<uint64_t>(o.heads));
  src->set_u(a + "attention.head_count_kv", static_cast<uint64_t>(o.kv_heads));
  src->set_u(a + "attention.key_length", static_cast<uint64_t>(o.head_dim));
  src->set_u(a + "attention.value_length", static_cast<uint64_t>(o.head_dim));
  src->set_f(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  src->set_f(a + "rope.freq_base", 10000.0f);
  src->set_u(a + "rope.dimension_count", static_cast<uint64_t>(o.qwen3moe ? o.head_dim : o.rope_dim));
  src->set_u(a + "expert_count", static_cast<uint64_t>(o.experts));
  src->set_u(a + "expert_used_count", static_cast<uint64_t>(o.used));
  src->set_u(a + "expert_feed_forward_length", static_cast<uint64_t>(o.ff));
  const bool gated = !o.qwen3moe && o.gated;
  const int hc = o.qwen3moe ? 1 : o.hc;
  const int fs = o.qwen3moe ? 0 : o.ff_shared;
  const int hi = o.qwen3moe ? 0 : o.idx_heads;
  if (!o.qwen3moe) {
    src->set_u(a + "nextn_predict_layers", static_cast<uint64_t>(nextn));
    src->set_b(a + "attention.gated", gated);
    src->set_u(a + "attention.sink_count", static_cast<uint64_t>(o.sink));
    src->set_u(a + "attention.sliding_window", static_cast<uint64_t>(o.window));
    src->set_u(a + "attention.indexer.head_count", static_cast<uint64_t>(hi));
    src->set_u(a + "attention.indexer.key_length", static_cast<uint64_t>(o.idx_dim));
    src->set_u(a + "attention.indexer.top_k", static_cast<uint64_t>(o.idx_top_k));
    src->set_u(a + "expert_shared_feed_forward_length", static_cast<uint64_t>(fs));
    src->set_u(a + "hyper_connection.count", static_cast<uint64_t>(hc));
    src->set_u(a + "hyper_connection.sinkhorn_iterations", static_cast<uint64_t>(o.sinkhorn));
    src->set_f(a + "hyper_connection.epsilon", 1e-6f);
    if (nextn) src->set_u(a + "nextn.vocab_size", static_cast<uint64_t>(o.mtp_vocab));
  }
  mat("token_embd.weight", o.vocab, d);
  mat("output.weight", o.vocab, d);
  norm("output_norm.weight", d);
  if (hc > 1) {
    f32("output_hc_fn.weight", {hc, hc * d}, 0.5f);
    f32("output_hc_base.weight", {hc}, 0.5f);
    f32("output_hc_scale.weight", {1}, 0.5f);
  }
  auto block = [&](int b, bool indexer) {
    const std::string p = "blk." + std::to_string(b) + ".";
    norm(p + "attn_norm.weight", d);
    mat(p + "attn_q.weight", int64_t{o.heads} * o.head_dim * (gated ? 2 : 1), d);
    mat(p + "attn_k.weight", int64_t{o.kv_heads} * o.head_dim, d);
    mat(p + "attn_v.weight", int64_t{o.kv_heads} * o.head_dim, d);
    norm(p + "attn_q_norm.weight", o.head_dim);
    norm(p + "attn_k_norm.weight", o.head_dim);
    mat(p + "attn_output.weight", d, int64_t{o.heads} * o.head_dim);
    if (indexer && hi > 0) {
      mat(p + "indexer.attn_q.weight", int64_t{hi} * o.idx_dim, d);
      mat(p + "indexer.attn_k.weight", o.idx_dim, d);
      mat(p + "indexer.weights.weight", hi, d);
    }
    norm(p + "ffn_norm.weight", d);
    src->add_f32(p + "ffn_gate_inp.weight", {o.experts, d}, randn(g, static_cast<std::size_t>(o.experts * d), 1.0f));
    experts(p + "ffn_gate_exps.weight", o.experts, o.ff, d);
    experts(p + "ffn_up_exps.weight", o.experts, o.ff, d);
    experts(p + "ffn_down_exps.weight", o.experts, d, o.ff);
    if (fs > 0) {
      mat(p + "ffn_gate_shexp.weight", fs, d);
      mat(p + "ffn_up_shexp.weight", fs, d);
      mat(p + "ffn_down_shexp.weight", d, fs);
      src->add_f32(p + "ffn_gate_inp_shexp.weight", {1, d}, randn(g, static_cast<std::size_t>(d), 0.3f));
    }
    if (hc > 1) {
      for (const char* h : {"hc_attn", "hc_ffn"}) {
        f32(p + h + "_fn.weight", {(2 + hc) * hc, hc * d}, 0.5f);
        f32(p + h + "_base.weight", {(2 + hc) * hc}, 0.5f);
        f32(p + h + "_scale.weight", {3}, 0.5f);
      }
    }
  };
  for (int l = 0; l < o.layers; ++l) block(l, true);
  if (nextn) {
    const int M = o.layers;
    block(M, false);
    const std::string p = "blk." + std::to_string(M) + ".nextn.";
    norm(p + "enorm.weight", d);
    norm(p + "hnorm.weight", d);
    mat(p + "fc_embedding.weight", d, d);
    mat(p + "fc_hidden.weight", d, d);
    if (hc > 1) {
      f32(p + "hc_head_fn.weight", {hc, hc * d}, 0.5f);
      f32(p + "hc_head_base.weight", {hc}, 0.5f);
      f32(p + "hc_head_scale.weight", {1}, 0.5f);
    }
    norm(p + "shared_head_norm.weight", d);
    std::vector<int32_t> ids;
    if (o.mtp_ids_contiguous) {
      for (int i = 0; i < o.mtp_vocab; ++i) ids.push_back(3 + i);
    } else {
      for (int i = 0; i < o.mtp_vocab; ++i) ids.push_back((i * 7 + 2) % o.vocab);
    }
    src->add_i32(p + "vocab_ids", ids);
  }
  return src;
}

inline std::unique_ptr<strata::model::Model> tiny_model(const TinyOptions& o) {
  return strata::model::Model::from_source(tiny_source(o));
}

}  // namespace strata_test
