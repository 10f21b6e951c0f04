#include "strata/model/hparams.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "strata/model/deepseek4_keys.h"
#include "strata/model/key_reader.h"
#include "strata/util/error.h"

namespace strata::model {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::Int8: return "int8";
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
  }
  return "?";
}

namespace {

HParams read_strata(const ModelSource& src) {
  KeyReader k(src, "strata.");
  HParams hp;
  hp.arch = Arch::Strata;
  hp.arch_name = "strata";
  hp.kv_type = KvType::Int8;
  hp.context_length = k.u32("context_length");
  hp.n_embd = k.u32("embedding_length");
  hp.n_block = k.u32("block_count");
  hp.n_nextn = k.u32("nextn_predict_layers", 0);
  hp.n_head = k.u32("attention.head_count");
  hp.n_head_kv = k.u32("attention.head_count_kv");
  hp.head_dim = k.u32("attention.key_length");
  const uint32_t value_length = k.u32("attention.value_length", hp.head_dim);
  if (value_length != hp.head_dim)
    k.fail("attention.value_length",
           "= " + std::to_string(value_length) + " must equal attention.key_length = " + std::to_string(hp.head_dim));
  hp.rms_eps = k.f32("attention.layer_norm_rms_epsilon");
  hp.attn_gated = k.flag("attention.gated", false);
  hp.sink_count = k.u32("attention.sink_count", 0);
  hp.sliding_window = k.u32("attention.sliding_window", 0);
  hp.indexer_heads = k.u32("attention.indexer.head_count", 0);
  if (hp.indexer_heads > 0) {
    hp.indexer_dim = k.u32("attention.indexer.key_length");
    hp.indexer_top_k = k.u32("attention.indexer.top_k");
  }
  hp.rope_base = k.f32("rope.freq_base");
  hp.rope_dim = k.u32("rope.dimension_count", hp.head_dim);
  hp.n_expert = k.u32("expert_count");
  hp.n_expert_used = k.u32("expert_used_count");
  hp.ff_expert = k.u32("expert_feed_forward_length");
  hp.ff_shared = k.u32("expert_shared_feed_forward_length", 0);
  hp.hc_count = k.u32("hyper_connection.count", 1);
  if (hp.hc_count > 1) {
    hp.hc_sinkhorn_iters = k.u32("hyper_connection.sinkhorn_iterations");
    hp.hc_eps = k.f32("hyper_connection.epsilon");
  }
  if (hp.n_nextn == 1) hp.mtp_vocab = k.u32("nextn.vocab_size");
  if (hp.n_nextn > 1) k.fail("nextn_predict_layers", "= " + std::to_string(hp.n_nextn) + " (only 0 or 1 supported)");
  if (hp.n_block <= hp.n_nextn)
    k.fail("block_count", "= " + std::to_string(hp.n_block) +
                              " leaves no main layer (nextn_predict_layers = " + std::to_string(hp.n_nextn) + ")");
  hp.n_layer = hp.n_block - hp.n_nextn;
  return hp;
}

// The attention, RoPE and expert keys qwen3moe and glm4moe spell alike (llama.cpp's names).
void read_llama_style_keys(const KeyReader& k, HParams& hp) {
  hp.n_head = k.u32("attention.head_count");
  hp.n_head_kv = k.u32("attention.head_count_kv", hp.n_head);
  if (hp.n_head == 0) k.fail("attention.head_count", "must be > 0");
  hp.head_dim = k.u32("attention.key_length", hp.n_embd / hp.n_head);
  const uint32_t value_length = k.u32("attention.value_length", hp.head_dim);
  if (value_length != hp.head_dim)
    k.fail("attention.value_length",
           "= " + std::to_string(value_length) + " must equal attention.key_length = " + std::to_string(hp.head_dim));
  hp.rms_eps = k.f32("attention.layer_norm_rms_epsilon");
  hp.rope_base = k.f32("rope.freq_base", 10000.0f);
  hp.rope_dim = k.u32("rope.dimension_count", hp.head_dim);
  hp.n_expert = k.u32("expert_count");
  hp.n_expert_used = k.u32("expert_used_count");
  hp.ff_expert = k.u32("expert_feed_forward_length");
}

HParams read_qwen3moe(const ModelSource& src) {
  KeyReader k(src, "qwen3moe.");
  HParams hp;
  hp.arch = Arch::Qwen3Moe;
  hp.arch_name = "qwen3moe";
  hp.kv_type = KvType::F32;
  hp.context_length = k.u32("context_length");
  hp.n_embd = k.u32("embedding_length");
  hp.n_block = k.u32("block_count");
  hp.n_layer = hp.n_block;
  read_llama_style_keys(k, hp);
  hp.hc_count = 1;
  return hp;
}

// llama.cpp's `glm4moe` keys (convert_hf_to_gguf.py Glm4MoeModel); docs/gguf.md §4.
HParams read_glm4moe(const ModelSource& src) {
  KeyReader k(src, "glm4moe.");
  HParams hp;
  hp.arch = Arch::Glm4Moe;
  hp.arch_name = "glm4moe";
  hp.kv_type = KvType::F32;
  hp.context_length = k.u32("context_length");
  hp.n_embd = k.u32("embedding_length");
  hp.n_block = k.u32("block_count");
  hp.n_nextn = k.u32("nextn_predict_layers", 0);
  if (hp.n_nextn > 1) k.fail("nextn_predict_layers", "= " + std::to_string(hp.n_nextn) + " (only 0 or 1 supported)");
  if (hp.n_block <= hp.n_nextn)
    k.fail("block_count", "= " + std::to_string(hp.n_block) +
                              " leaves no main layer (nextn_predict_layers = " + std::to_string(hp.n_nextn) + ")");
  hp.n_layer = hp.n_block - hp.n_nextn;
  read_llama_style_keys(k, hp);
  hp.ff_shared = hp.ff_expert * k.u32("expert_shared_count", 0);
  hp.n_dense_lead = k.u32("leading_dense_block_count", 0);
  if (hp.n_dense_lead >= hp.n_layer)
    k.fail("leading_dense_block_count", "= " + std::to_string(hp.n_dense_lead) + " leaves no MoE layer (" +
                                            std::to_string(hp.n_layer) + " main layers)");
  if (hp.n_dense_lead > 0) {
    hp.ff_dense = k.u32("feed_forward_length");
    if (hp.ff_dense == 0) k.fail("feed_forward_length", "must be > 0 with leading dense layers");
  }
  // llama.cpp: 0 (none) or absent means sigmoid for this architecture; 1 = softmax, 2 = sigmoid.
  const uint32_t gating = k.u32("expert_gating_func", 2);
  if (gating > 2) k.fail("expert_gating_func", "= " + std::to_string(gating) + " (1 = softmax, 2 = sigmoid)");
  hp.gating = gating == 1 ? Gating::Softmax : Gating::Sigmoid;
  hp.expert_weights_norm = k.flag("expert_weights_norm", false);
  hp.expert_weights_scale = k.f32("expert_weights_scale", 1.0f);
  if (!(hp.expert_weights_scale > 0.0f) || !(hp.expert_weights_scale < 1e6f))
    k.fail("expert_weights_scale", "must be a positive finite number");
  hp.hc_count = 1;
  return hp;
}

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw_file_error(ErrorKind::Format, origin, what);
}

std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Strata: return "strata";
    case Arch::Qwen3Moe: return "qwen3moe";
    case Arch::Glm4Moe: return "glm4moe";
    case Arch::DeepSeek4: return "deepseek4";
  }
  return "?";
}

void validate_hparams(const HParams& hp, const std::string& origin) {
  const std::string p = hp.arch_name + ".";
  auto positive = [&](uint32_t v, const char* key) {
    if (v == 0) bad(origin, "key " + p + key + " must be > 0");
  };
  positive(hp.n_embd, "embedding_length");
  positive(hp.n_layer, "block_count");
  positive(hp.n_head, "attention.head_count");
  positive(hp.n_head_kv, "attention.head_count_kv");
  positive(hp.head_dim, "attention.key_length");
  positive(hp.n_expert, "expert_count");
  positive(hp.n_expert_used, "expert_used_count");
  positive(hp.ff_expert, "expert_feed_forward_length");
  positive(hp.context_length, "context_length");
  if (hp.n_head % hp.n_head_kv != 0)
    bad(origin, "key " + p + "attention.head_count = " + std::to_string(hp.n_head) +
                    " is not a multiple of attention.head_count_kv = " + std::to_string(hp.n_head_kv));
  if (hp.rope_dim % 2 != 0 || hp.rope_dim > hp.head_dim)
    bad(origin, "key " + p + "rope.dimension_count = " + std::to_string(hp.rope_dim) +
                    " must be even and <= attention.key_length = " + std::to_string(hp.head_dim));
  // Non-finite or non-positive floats load "fine" and then generate garbage (inf rope base turns every
  // angle into NaN), so they are refused here with the key's value.
  auto finite = [&](float v, const char* key, bool zero_ok) {
    if (!std::isfinite(v) || v < 0.0f || (!zero_ok && v == 0.0f))
      bad(origin, "key " + p + key + " = " + float_text(v) + " must be finite and " + (zero_ok ? ">= 0" : "> 0"));
  };
  finite(hp.rope_base, "rope.freq_base", false);
  finite(hp.rms_eps, "attention.layer_norm_rms_epsilon", true);
  if (hp.hc_count > 1) finite(hp.hc_eps, "hyper_connection.epsilon", true);
  if (hp.n_expert_used > hp.n_expert)
    bad(origin, "key " + p + "expert_used_count = " + std::to_string(hp.n_expert_used) +
                    " exceeds expert_count = " + std::to_string(hp.n_expert));
  if (hp.n_expert_used > 64)
    bad(origin, "key " + p + "expert_used_count = " + std::to_string(hp.n_expert_used) +
                    " exceeds the 64 experts per token strata supports");
  if (hp.hc_count == 0) bad(origin, "key " + p + "hyper_connection.count must be >= 1");
  if (hp.hc_count > 64)
    bad(origin, "key " + p + "hyper_connection.count = " + std::to_string(hp.hc_count) + " (max 64)");
  if (hp.hc_count > 1 && (hp.hc_sinkhorn_iters == 0 || hp.hc_sinkhorn_iters > 1000))
    bad(origin, "key " + p + "hyper_connection.sinkhorn_iterations = " + std::to_string(hp.hc_sinkhorn_iters) +
                    " must be in [1, 1000] when hyper_connection.count > 1");
  if (hp.indexer_heads > 0) {
    positive(hp.indexer_dim, "attention.indexer.key_length");
    positive(hp.indexer_top_k, "attention.indexer.top_k");
  }
  // glm4moe's nextn head covers the whole vocabulary (set by the binding), so only strata has the key.
  if (hp.arch == Arch::Strata && hp.n_nextn == 1 && hp.mtp_vocab == 0)
    bad(origin, "key " + p + "nextn.vocab_size must be > 0");
}

HParams read_hparams(const ModelSource& src) {
  auto arch = src.find_string("general.architecture");
  if (!arch) throw_file_error(ErrorKind::Format, src.origin(), "key general.architecture is missing");
  HParams hp;
  if (*arch == "strata") {
    hp = read_strata(src);
  } else if (*arch == "qwen3moe") {
    hp = read_qwen3moe(src);
  } else if (*arch == "glm4moe") {
    hp = read_glm4moe(src);
  } else if (*arch == "deepseek4") {
    hp = read_deepseek4(src);
  } else {
    throw_file_error(ErrorKind::Format, src.origin(),
                     "general.architecture = '" + *arch +
                         "' is not supported (expected 'strata', 'qwen3moe', 'glm4moe' or 'deepseek4')");
  }
  validate_hparams(hp, src.origin());
  return hp;
}

}  // namespace strata::model
