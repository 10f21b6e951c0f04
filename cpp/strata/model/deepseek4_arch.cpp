// Weight binding of llama.cpp's `deepseek4` architecture (docs/models.md, "Keys and tensors"):
// every tensor checked against the hyper-parameters; compressor tensors exactly in the CSA / HCA
// layers, indexer tensors exactly in CSA layers, ffn_gate_tid2eid exactly in the hash-routed
// layers (each expert id < expert_count) and exp_probs_b in the others. The MTP block
// (nextn_predict_layers = 1) is not bound: the main model runs without a drafter.
#include <string>

#include "strata/model/model.h"
#include "strata/model/tensor_binder.h"
#include "strata/util/error.h"

namespace strata::model {
namespace {

[[noreturn]] void refuse(const TensorBinder& b, const std::string& what) {
  throw_file_error(ErrorKind::Format, b.origin(), what);
}

void presence(const TensorBinder& b, const std::string& name, bool wanted, const std::string& why) {
  if (b.has(name) != wanted)
    refuse(b, "tensor " + name + (wanted ? " is missing (" : " is present but ") + why + (wanted ? ")" : ""));
}

HyperConnWeights bind_hc(TensorBinder& b, const HParams& hp, const std::string& prefix) {
  const int64_t n = hp.hc_count, d = hp.n_embd;
  HyperConnWeights w;
  if (n == 1) return w;
  w.fn = b.f32(prefix + "_fn.weight", {(2 + n) * n, n * d});
  w.base = b.f32(prefix + "_base.weight", {(2 + n) * n});
  w.scale = b.f32(prefix + "_scale.weight", {3});
  return w;
}

Ds4CompressorWeights bind_compressor(TensorBinder& b, const std::string& prefix, int ratio, int64_t dim, int64_t d) {
  Ds4CompressorWeights c;
  c.ratio = ratio;
  c.dim = static_cast<int>(dim);
  c.coff = ratio == 4 ? 2 : 1;  // CSA's windows overlap: two series per token
  const int64_t width = c.coff * dim;
  c.kv = b.matrix(prefix + "_kv.weight", width, d);
  c.gate = b.matrix(prefix + "_gate.weight", width, d);
  c.ape = b.f32(prefix + "_ape.weight", {ratio, width});
  c.norm = b.f32(prefix + "_norm.weight", {dim});
  return c;
}

Ds4AttentionWeights bind_attention(TensorBinder& b, const HParams& hp, uint32_t l) {
  const Ds4HParams& x = hp.ds4;
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t d = hp.n_embd, Dh = hp.head_dim, Hq = hp.n_head, G = x.o_groups;
  Ds4AttentionWeights a;
  a.ratio = static_cast<int>(x.compress_ratio[l]);
  a.sinks = b.f32(p + "attn_sinks.weight", {Hq});
  a.q_a = b.matrix(p + "attn_q_a.weight", x.q_lora, d);
  a.q_a_norm = b.f32(p + "attn_q_a_norm.weight", {x.q_lora});
  a.q_b = b.matrix(p + "attn_q_b.weight", Hq * Dh, x.q_lora);
  a.kv = b.matrix(p + "attn_kv.weight", Dh, d);
  a.kv_norm = b.f32(p + "attn_kv_a_norm.weight", {Dh});
  a.o_a = b.matrix(p + "attn_output_a.weight", G * x.o_lora, Hq * Dh / G);
  a.o_b = b.matrix(p + "attn_output_b.weight", d, G * x.o_lora);
  const std::string why = "deepseek4.attention.compress_ratios[" + std::to_string(l) + "] = " + std::to_string(a.ratio);
  presence(b, p + "attn_compressor_kv.weight", a.ratio > 0, why);
  presence(b, p + "indexer.proj.weight", a.ratio == 4, why);
  if (a.ratio > 0) a.comp = bind_compressor(b, p + "attn_compressor", a.ratio, Dh, d);
  if (a.ratio == 4) {
    const int64_t Hi = x.idx_heads, Di = x.idx_dim;
    a.idx_proj = b.matrix(p + "indexer.proj.weight", Hi, d);
    a.idx_q_b = b.matrix(p + "indexer.attn_q_b.weight", Hi * Di, x.q_lora);
    a.idx_comp = bind_compressor(b, p + "indexer_compressor", 4, Di, d);
  }
  return a;
}

LayerWeights bind_layer(TensorBinder& b, const HParams& hp, uint32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t d = hp.n_embd, E = hp.n_expert, K = hp.n_expert_used, F = hp.ff_expert, Fs = hp.ff_shared;
  LayerWeights L;
  L.attn.norm = b.f32(p + "attn_norm.weight", {d});
  MoeWeights& m = L.moe;
  m.norm = b.f32(p + "ffn_norm.weight", {d});
  m.router = b.matrix(p + "ffn_gate_inp.weight", E, d);
  m.gate = b.experts(p + "ffn_gate_exps.weight", E, F, d);
  m.up = b.experts(p + "ffn_up_exps.weight", E, F, d);
  m.down = b.experts(p + "ffn_down_exps.weight", E, d, F);
  m.sh_gate = b.matrix(p + "ffn_gate_shexp.weight", Fs, d);
  m.sh_up = b.matrix(p + "ffn_up_shexp.weight", Fs, d);
  m.sh_down = b.matrix(p + "ffn_down_shexp.weight", d, Fs);
  const bool hashed = hp.ds4.hashed(l);
  const std::string why = "deepseek4.hash_layer_count = " + std::to_string(hp.ds4.hash_layers);
  presence(b, p + "ffn_gate_tid2eid.weight", hashed, why);
  if (hashed) {
    const int64_t V = hp.n_vocab;
    m.tid2eid = b.i32(p + "ffn_gate_tid2eid.weight", {V, K});
    for (int64_t i = 0; i < V * K; ++i)
      if (m.tid2eid[i] < 0 || m.tid2eid[i] >= E)
        refuse(b, "tensor " + p + "ffn_gate_tid2eid.weight: token " + std::to_string(i / K) + " names expert " +
                      std::to_string(m.tid2eid[i]) + ", outside 0.." + std::to_string(E - 1));
  } else {
    m.score_bias = b.f32(p + "exp_probs_b.bias", {E});
  }
  L.hc_attn = bind_hc(b, hp, p + "hc_attn");
  L.hc_ffn = bind_hc(b, hp, p + "hc_ffn");
  return L;
}

}  // namespace

void bind_deepseek4(Model& m) {
  HParams& hp = m.hp_;
  TensorBinder b(*m.src_);
  const int64_t d = hp.n_embd, n = hp.hc_count;
  const int64_t V = b.rows_of("token_embd.weight");
  if (V <= 0 || V > 0x7FFFFFFF) refuse(b, "tensor token_embd.weight has " + std::to_string(V) + " rows");
  hp.n_vocab = static_cast<uint32_t>(V);
  m.tok_embd = b.matrix("token_embd.weight", V, d);
  m.output = b.has("output.weight") ? b.matrix("output.weight", V, d) : m.tok_embd;
  m.output_norm = b.f32("output_norm.weight", {d});
  if (n > 1) {
    m.head_hc.fn = b.f32("output_hc_fn.weight", {n, n * d});
    m.head_hc.base = b.f32("output_hc_base.weight", {n});
    m.head_hc.scale = b.f32("output_hc_scale.weight", {1});
  }
  m.layers.reserve(hp.n_layer);
  m.ds4_attn.reserve(hp.n_layer);
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    m.layers.push_back(bind_layer(b, hp, l));
    m.ds4_attn.push_back(bind_attention(b, hp, l));
  }
}

}  // namespace strata::model
