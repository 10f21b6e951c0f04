// Weight binding of llama.cpp's `deepseek4` architecture (docs/models.md, "Keys and tensors"):
// every tensor checked against the hyper-parameters; compressor tensors exactly in the CSA / HCA
// layers, indexer tensors exactly in CSA layers, ffn_gate_tid2eid exactly in the hash-routed
// layers (each expert id < expert_count) and exp_probs_b in the others. The MTP layer comes from
// llama.cpp's separate MTP file (bind_deepseek4_mtp): block L = n_layer with its nextn.* tensors
// and the MTP's own output_hc_* head, after checking the file belongs to the main model.
#include <string>
#include <utility>

#include "strata/model/column_split.h"
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

namespace {

// The MTP file must be the main model's: the same architecture and shapes, one block more.
void check_mtp_file(const HParams& main, const HParams& mtp, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    throw_file_error(ErrorKind::Format, origin, "is not this model's MTP file: " + what);
  };
  auto same = [&](const char* key, uint64_t a, uint64_t b) {
    if (a != b) bad(std::string(key) + " = " + std::to_string(b) + ", the main model has " + std::to_string(a));
  };
  if (mtp.arch != Arch::DeepSeek4) bad("general.architecture = " + mtp.arch_name + " (expected deepseek4)");
  if (mtp.n_nextn != 1) bad("deepseek4.nextn_predict_layers = " + std::to_string(mtp.n_nextn) + " (expected 1)");
  if (mtp.n_block != main.n_layer + 1)
    bad("deepseek4.block_count = " + std::to_string(mtp.n_block) + " (expected the main model's " +
        std::to_string(main.n_layer) + " + 1)");
  same("embedding_length", main.n_embd, mtp.n_embd);
  same("vocabulary (token_embd rows)", main.n_vocab, mtp.n_vocab);
  same("attention.head_count", main.n_head, mtp.n_head);
  same("attention.key_length", main.head_dim, mtp.head_dim);
  same("attention.q_lora_rank", main.ds4.q_lora, mtp.ds4.q_lora);
  same("attention.output_group_count", main.ds4.o_groups, mtp.ds4.o_groups);
  same("attention.output_lora_rank", main.ds4.o_lora, mtp.ds4.o_lora);
  same("attention.sliding_window", main.ds4.window, mtp.ds4.window);
  same("expert_count", main.n_expert, mtp.n_expert);
  same("expert_used_count", main.n_expert_used, mtp.n_expert_used);
  same("expert_feed_forward_length", main.ff_expert, mtp.ff_expert);
  same("shared expert width", main.ff_shared, mtp.ff_shared);
  same("hyper_connection.count", main.hc_count, mtp.hc_count);
}

}  // namespace

void bind_deepseek4_mtp(Model& m, std::unique_ptr<ModelSource> src) {
  HParams& hp = m.hp_;
  const std::string origin = src->origin();
  if (hp.arch != Arch::DeepSeek4)
    throw_file_error(ErrorKind::Value, origin,
                     "a separate MTP file is for deepseek4 models only (the main model is " + hp.arch_name + ")");
  if (m.mtp) throw_file_error(ErrorKind::Value, origin, "the main model already has an MTP layer");
  HParams x = read_hparams(*src);
  TensorBinder b(*src);
  if (x.arch == Arch::DeepSeek4) {
    const int64_t V = b.rows_of("token_embd.weight");
    x.n_vocab = V > 0 && V <= 0x7FFFFFFF ? static_cast<uint32_t>(V) : 0;
  }
  check_mtp_file(hp, x, origin);
  const uint32_t l = hp.n_layer;
  const int64_t d = hp.n_embd, n = hp.hc_count, V = hp.n_vocab;
  const std::string p = "blk." + std::to_string(l) + ".", mp = p + "nextn.";
  // The shared embedding, final norm and LM head are copies of the main file's: checked for shape,
  // the main model's are used.
  b.matrix("token_embd.weight", V, d);
  if (b.has("output.weight")) b.matrix("output.weight", V, d);
  MtpWeights w;
  w.block = bind_layer(b, x, l);
  Ds4MtpWeights dw;
  dw.attn = bind_attention(b, x, l);
  dw.attn.ratio = 0;  // llama.cpp's graph_mtp: the sliding-window branch only
  dw.attn.comp = {};
  dw.attn.idx_comp = {};
  dw.attn.idx_proj = {};
  dw.attn.idx_q_b = {};
  dw.clamp_exp = x.ds4.clamp_exp[l];
  dw.clamp_shexp = x.ds4.clamp_shexp[l];
  const Weight eh = b.matrix(mp + "eh_proj.weight", d, 2 * d);
  w.fc_embedding = column_half(m, eh, 0, mp + "eh_proj.weight", origin);  // e_proj: the embedding half
  w.fc_hidden = column_half(m, eh, 1, mp + "eh_proj.weight", origin);     // h_proj: the streams' half
  w.enorm = b.f32(mp + "enorm.weight", {d});
  w.hnorm = b.f32(mp + "hnorm.weight", {d});
  w.shared_head_norm = b.f32(mp + "shared_head_norm.weight", {d});
  if (n > 1) {  // the MTP layer's own hyper-connection head
    w.head_hc.fn = b.f32("output_hc_fn.weight", {n, n * d});
    w.head_hc.base = b.f32("output_hc_base.weight", {n});
    w.head_hc.scale = b.f32("output_hc_scale.weight", {1});
  }
  // The head covers the whole vocabulary: vocab_ids = 0 .. V-1.
  w.vocab_ids = m.owned_identity_ids(V);
  hp.mtp_vocab = static_cast<uint32_t>(V);
  m.mtp = w;
  m.ds4_mtp = dw;
  m.mtp_src_ = std::move(src);
}

}  // namespace strata::model
