// llama.cpp's `deepseek4` keys as its converter writes them (docs/models.md, "Keys and tensors").
#include "strata/model/deepseek4_keys.h"

#include <cmath>
#include <string>
#include <vector>

#include "strata/model/key_reader.h"

namespace strata::model {
namespace {

// llama.cpp's llama_expert_gating_func_type for sqrt(softplus(logit)).
constexpr uint32_t kGatingSqrtSoftplus = 4;

std::string n_text(std::size_t n) { return std::to_string(n); }

// A per-block array: exactly block_count entries, all kept (an MTP file's block L is its MTP layer).
template <typename T>
std::vector<T> per_layer(const KeyReader& k, const std::string& key, const std::optional<std::vector<T>>& v,
                         const HParams& hp) {
  if (!v) k.fail(key, "is missing");
  if (v->size() != hp.n_block)
    k.fail(key,
           "has " + n_text(v->size()) + " entries, expected one per block (block_count = " + n_text(hp.n_block) + ")");
  return *v;
}

void read_attention(const KeyReader& k, HParams& hp) {
  Ds4HParams& x = hp.ds4;
  hp.n_head = k.u32("attention.head_count");
  hp.n_head_kv = k.u32("attention.head_count_kv", 1);
  if (hp.n_head_kv != 1)
    k.fail("attention.head_count_kv", "= " + n_text(hp.n_head_kv) + " (deepseek4 has one shared K = V head)");
  hp.head_dim = k.u32("attention.key_length");
  const uint32_t value_length = k.u32("attention.value_length", hp.head_dim);
  if (value_length != hp.head_dim)
    k.fail("attention.value_length", "= " + n_text(value_length) + " must equal attention.key_length (K = V)");
  hp.rms_eps = k.f32("attention.layer_norm_rms_epsilon");
  hp.rope_base = k.f32("rope.freq_base", 10000.0f);
  hp.rope_dim = k.u32("rope.dimension_count");
  x.q_lora = k.u32("attention.q_lora_rank");
  if (x.q_lora == 0) k.fail("attention.q_lora_rank", "must be > 0");
  x.window = k.u32("attention.sliding_window");
  if (x.window == 0) k.fail("attention.sliding_window", "must be > 0");
  x.o_groups = k.u32("attention.output_group_count");
  if (x.o_groups == 0 || hp.n_head % x.o_groups != 0)
    k.fail("attention.output_group_count",
           "= " + n_text(x.o_groups) + " must be > 0 and divide attention.head_count = " + n_text(hp.n_head));
  x.o_lora = k.u32("attention.output_lora_rank");
  if (x.o_lora == 0) k.fail("attention.output_lora_rank", "must be > 0");
  x.compress_ratio = per_layer(k, "attention.compress_ratios", k.u32_array("attention.compress_ratios"), hp);
  bool csa = false;
  for (std::size_t l = 0; l < x.compress_ratio.size(); ++l) {
    const uint32_t r = x.compress_ratio[l];
    if (r != 0 && r != 4 && r != 128)
      k.fail("attention.compress_ratios",
             "entry " + n_text(l) + " = " + n_text(r) + " (0, 4 or 128: llama.cpp's layer types)");
    csa = csa || r == 4;
  }
  x.compress_rope_base = k.f32("attention.compress_rope_freq_base", hp.rope_base);
  if (!std::isfinite(x.compress_rope_base) || x.compress_rope_base <= 0.0f)
    k.fail("attention.compress_rope_freq_base", "must be finite and > 0");
  if (csa) {
    x.idx_heads = k.u32("attention.indexer.head_count");
    x.idx_dim = k.u32("attention.indexer.key_length");
    x.idx_top_k = k.u32("attention.indexer.top_k");
    if (x.idx_heads == 0 || x.idx_top_k == 0) k.fail("attention.indexer.head_count", "and top_k must be > 0");
    if (x.idx_dim < hp.rope_dim)
      k.fail("attention.indexer.key_length", "= " + n_text(x.idx_dim) + " is below rope.dimension_count = " +
                                                 n_text(hp.rope_dim) + " (the indexer's keys are rotated too)");
  }
  if (auto type = k.text("rope.scaling.type"); type && *type != "none") {
    if (*type != "yarn") k.fail("rope.scaling.type", "= '" + *type + "' (deepseek4: 'yarn' or none)");
    YarnParams& y = x.yarn;
    y.on = true;
    y.factor = k.f32("rope.scaling.factor");
    y.original_context = k.u32("rope.scaling.original_context_length");
    y.beta_fast = k.f32("rope.scaling.yarn_beta_fast", 32.0f);
    y.beta_slow = k.f32("rope.scaling.yarn_beta_slow", 1.0f);
    if (!std::isfinite(y.factor) || y.factor <= 0.0f) k.fail("rope.scaling.factor", "must be finite and > 0");
    if (y.original_context == 0) k.fail("rope.scaling.original_context_length", "must be > 0");
    if (!std::isfinite(y.beta_fast) || !std::isfinite(y.beta_slow) || y.beta_fast <= 0.0f || y.beta_slow <= 0.0f)
      k.fail("rope.scaling.yarn_beta_fast", "and yarn_beta_slow must be finite and > 0");
  }
}

void read_moe(const KeyReader& k, HParams& hp) {
  Ds4HParams& x = hp.ds4;
  hp.n_expert = k.u32("expert_count");
  hp.n_expert_used = k.u32("expert_used_count");
  hp.ff_expert = k.u32("expert_feed_forward_length");
  // llama.cpp's shared expert is count × expert width.
  hp.ff_shared = hp.ff_expert * k.u32("expert_shared_count", 1);
  const uint32_t gating = k.u32("expert_gating_func", kGatingSqrtSoftplus);
  if (gating != kGatingSqrtSoftplus)
    k.fail("expert_gating_func", "= " + n_text(gating) + " (deepseek4 scores experts with sqrt(softplus), 4)");
  hp.gating = Gating::SqrtSoftplus;
  hp.expert_weights_norm = k.flag("expert_weights_norm", true);
  hp.expert_weights_scale = k.f32("expert_weights_scale", 1.0f);
  if (!(hp.expert_weights_scale > 0.0f) || !(hp.expert_weights_scale < 1e6f))
    k.fail("expert_weights_scale", "must be a positive finite number");
  x.hash_layers = k.u32("hash_layer_count", 0);
  if (x.hash_layers > hp.n_layer)
    k.fail("hash_layer_count", "= " + n_text(x.hash_layers) + " exceeds the " + n_text(hp.n_layer) + " main layers");
  auto clamps = [&](const char* key) {
    auto v = k.f32_array(key);
    if (!v) return std::vector<float>(hp.n_block, 0.0f);
    std::vector<float> c = per_layer(k, key, v, hp);
    for (float f : c)
      if (!std::isfinite(f) || f < 0.0f)
        k.fail(key, "holds " + std::to_string(f) + " (limits must be finite and >= 0)");
    return c;
  };
  x.clamp_exp = clamps("swiglu_clamp_exp");
  x.clamp_shexp = clamps("swiglu_clamp_shexp");
}

}  // namespace

HParams read_deepseek4(const ModelSource& src) {
  KeyReader k(src, "deepseek4.");
  HParams hp;
  hp.arch = Arch::DeepSeek4;
  hp.arch_name = "deepseek4";
  hp.kv_type = KvType::F32;
  hp.context_length = k.u32("context_length");
  hp.n_embd = k.u32("embedding_length");
  hp.n_block = k.u32("block_count");
  hp.n_nextn = k.u32("nextn_predict_layers", 0);
  if (hp.n_nextn > 1) k.fail("nextn_predict_layers", "= " + n_text(hp.n_nextn) + " (only 0 or 1 supported)");
  if (hp.n_block <= hp.n_nextn)
    k.fail("block_count",
           "= " + n_text(hp.n_block) + " leaves no main layer (nextn_predict_layers = " + n_text(hp.n_nextn) + ")");
  hp.n_layer = hp.n_block - hp.n_nextn;
  read_attention(k, hp);
  read_moe(k, hp);
  hp.hc_count = k.u32("hyper_connection.count");
  if (hp.hc_count > 1) {
    hp.hc_sinkhorn_iters = k.u32("hyper_connection.sinkhorn_iterations");
    hp.hc_eps = k.f32("hyper_connection.epsilon");
  }
  return hp;
}

}  // namespace strata::model
