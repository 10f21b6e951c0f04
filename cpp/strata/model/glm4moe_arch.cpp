// Weight binding of llama.cpp's `glm4moe` architecture (GLM-4.5 / 4.6 / Air; docs/gguf.md §4):
// n = 1, ungated attention with optional q/k/v biases and optional per-head q/k norms, partial NEOX
// RoPE, full causal attention, f32 K/V, leading dense SwiGLU layers, then MoE layers with sigmoid
// routing (expert score bias exp_probs_b) and an ungated shared expert; the nextn (MTP) block when
// nextn_predict_layers = 1.
#include <cstring>
#include <string>

#include "strata/model/column_split.h"
#include "strata/model/model.h"
#include "strata/quant/types.h"
#include "strata/model/tensor_binder.h"
#include "strata/util/error.h"

namespace strata::model {
namespace {

[[noreturn]] void refuse(const TensorBinder& b, const std::string& what) {
  throw_file_error(ErrorKind::Format, b.origin(), what);
}

const float* optional_f32(TensorBinder& b, const std::string& name, int64_t n) {
  return b.has(name) ? b.f32(name, {n}) : nullptr;
}

AttentionWeights bind_attention(TensorBinder& b, const HParams& hp, const std::string& p) {
  const int64_t d = hp.n_embd, Dh = hp.head_dim;
  AttentionWeights a;
  a.norm = b.f32(p + "attn_norm.weight", {d});
  a.q = b.matrix(p + "attn_q.weight", hp.q_rows(), d);
  a.k = b.matrix(p + "attn_k.weight", hp.kv_rows(), d);
  a.v = b.matrix(p + "attn_v.weight", hp.kv_rows(), d);
  a.o = b.matrix(p + "attn_output.weight", d, static_cast<int64_t>(hp.n_head) * Dh);
  a.q_bias = optional_f32(b, p + "attn_q.bias", hp.q_rows());
  a.k_bias = optional_f32(b, p + "attn_k.bias", hp.kv_rows());
  a.v_bias = optional_f32(b, p + "attn_v.bias", hp.kv_rows());
  if (b.has(p + "attn_output.bias")) refuse(b, "tensor " + p + "attn_output.bias is present: glm4moe has none");
  a.q_norm = optional_f32(b, p + "attn_q_norm.weight", Dh);
  a.k_norm = optional_f32(b, p + "attn_k_norm.weight", Dh);
  if ((a.q_norm == nullptr) != (a.k_norm == nullptr))
    refuse(b,
           "tensors " + p + "attn_q_norm.weight and " + p + "attn_k_norm.weight must be both present or both absent");
  return a;
}

LayerWeights bind_layer(TensorBinder& b, const HParams& hp, uint32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t d = hp.n_embd, E = hp.n_expert, F = hp.ff_expert, Fs = hp.ff_shared;
  LayerWeights L;
  L.attn = bind_attention(b, hp, p);
  // llama.cpp names the pre-FFN norm of this architecture post_attention_norm (HF's
  // post_attention_layernorm).
  const float* ffn_norm = b.f32(p + "post_attention_norm.weight", {d});
  if (hp.dense_layer(l)) {
    if (b.has(p + "ffn_gate_inp.weight"))
      refuse(b, "tensor " + p + "ffn_gate_inp.weight is present but block " + std::to_string(l) +
                    " is dense (glm4moe.leading_dense_block_count = " + std::to_string(hp.n_dense_lead) + ")");
    const int64_t Fd = hp.ff_dense;
    L.dense.norm = ffn_norm;
    L.dense.gate = b.matrix(p + "ffn_gate.weight", Fd, d);
    L.dense.up = b.matrix(p + "ffn_up.weight", Fd, d);
    L.dense.down = b.matrix(p + "ffn_down.weight", d, Fd);
    return L;
  }
  MoeWeights& m = L.moe;
  m.norm = ffn_norm;
  m.router = b.matrix(p + "ffn_gate_inp.weight", E, d);
  m.gate = b.experts(p + "ffn_gate_exps.weight", E, F, d);
  m.up = b.experts(p + "ffn_up_exps.weight", E, F, d);
  m.down = b.experts(p + "ffn_down_exps.weight", E, d, F);
  if (hp.gating == Gating::Sigmoid)
    m.score_bias = b.f32(p + "exp_probs_b.bias", {E});
  else if (b.has(p + "exp_probs_b.bias"))
    refuse(b, "tensor " + p + "exp_probs_b.bias is present but glm4moe.expert_gating_func is softmax");
  const bool sh = Fs > 0;
  for (const char* t : {"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"})
    if (b.has(p + t) != sh)
      refuse(b, "tensor " + p + t + (sh ? " is missing" : " is present") +
                    " (glm4moe.expert_shared_count = " + std::to_string(Fs / F) + ")");
  if (sh) {
    m.sh_gate = b.matrix(p + "ffn_gate_shexp.weight", Fs, d);
    m.sh_up = b.matrix(p + "ffn_up_shexp.weight", Fs, d);
    m.sh_down = b.matrix(p + "ffn_down_shexp.weight", d, Fs);
  }
  return L;
}

}  // namespace

void bind_glm4moe_nextn(Model& m, TensorBinder& b) {
  HParams& hp = m.hp_;
  const int64_t d = hp.n_embd, V = hp.n_vocab;
  const std::string mp = "blk." + std::to_string(hp.n_layer) + ".nextn.";
  MtpWeights w;
  w.block = bind_layer(b, hp, hp.n_layer);
  const Weight eh = b.matrix(mp + "eh_proj.weight", d, 2 * d);
  w.fc_embedding = column_half(m, eh, 0, mp + "eh_proj.weight", b.origin());  // eh_proj @ concat(enorm(e), hnorm(h))
  w.fc_hidden = column_half(m, eh, 1, mp + "eh_proj.weight", b.origin());
  w.enorm = b.f32(mp + "enorm.weight", {d});
  w.hnorm = b.f32(mp + "hnorm.weight", {d});
  w.shared_head_norm = b.f32(mp + "shared_head_norm.weight", {d});
  w.state_norm_main = m.output_norm;
  w.state_norm_chain = w.shared_head_norm;
  if (b.has(mp + "embed_tokens.weight")) w.embd = b.matrix(mp + "embed_tokens.weight", V, d);
  if (b.has(mp + "shared_head_head.weight")) w.head = b.matrix(mp + "shared_head_head.weight", V, d);
  // The head covers the whole vocabulary: vocab_ids = 0 .. V-1.
  w.vocab_ids = m.owned_identity_ids(V);
  hp.mtp_vocab = static_cast<uint32_t>(V);
  m.mtp = w;
}

void bind_glm4moe(Model& m) {
  HParams& hp = m.hp_;
  TensorBinder b(*m.src_);
  const int64_t d = hp.n_embd;
  const int64_t V = b.rows_of("token_embd.weight");
  if (V <= 0 || V > 0x7FFFFFFF)
    throw_file_error(ErrorKind::Format, b.origin(), "tensor token_embd.weight has " + std::to_string(V) + " rows");
  hp.n_vocab = static_cast<uint32_t>(V);
  m.tok_embd = b.matrix("token_embd.weight", V, d);
  m.output = b.has("output.weight") ? b.matrix("output.weight", V, d) : m.tok_embd;  // llama.cpp: tied fallback
  m.output_norm = b.f32("output_norm.weight", {d});
  m.layers.reserve(hp.n_layer);
  for (uint32_t l = 0; l < hp.n_layer; ++l) m.layers.push_back(bind_layer(b, hp, l));
  // The nextn block (blk.{n_layer}.*): strata's drafter (docs/gguf.md §4).
  if (hp.n_nextn == 1) bind_glm4moe_nextn(m, b);
}

}  // namespace strata::model
