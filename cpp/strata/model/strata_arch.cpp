// Weight binding of the `strata` architecture (docs/gguf.md §1): every tensor checked against the
// hyper-parameters; optional feature tensors must be present exactly when their feature is on.
#include <string>

#include "strata/model/model.h"
#include "strata/model/tensor_binder.h"
#include "strata/util/error.h"

namespace strata::model {
namespace {

void feature_presence(TensorBinder& b, const std::string& name, bool wanted, const std::string& why) {
  const bool have = b.has(name);
  if (have && !wanted) throw_file_error(ErrorKind::Format, b.origin(), "tensor " + name + " is present but " + why);
  if (!have && wanted) throw_file_error(ErrorKind::Format, b.origin(), "tensor " + name + " is missing (" + why + ")");
}

HyperConnWeights bind_hc(TensorBinder& b, const HParams& hp, const std::string& prefix) {
  const int64_t n = hp.hc_count, d = hp.n_embd;
  const std::string why = "strata.hyper_connection.count = " + std::to_string(n);
  feature_presence(b, prefix + "_fn.weight", n > 1, why);
  feature_presence(b, prefix + "_base.weight", n > 1, why);
  feature_presence(b, prefix + "_scale.weight", n > 1, why);
  HyperConnWeights w;
  if (n > 1) {
    w.fn = b.f32(prefix + "_fn.weight", {(2 + n) * n, n * d});
    w.base = b.f32(prefix + "_base.weight", {(2 + n) * n});
    w.scale = b.f32(prefix + "_scale.weight", {3});
  }
  return w;
}

HyperHeadWeights bind_head_hc(TensorBinder& b, const HParams& hp, const std::string& fn, const std::string& base,
                              const std::string& scale) {
  const int64_t n = hp.hc_count, d = hp.n_embd;
  const std::string why = "strata.hyper_connection.count = " + std::to_string(n);
  feature_presence(b, fn, n > 1, why);
  feature_presence(b, base, n > 1, why);
  feature_presence(b, scale, n > 1, why);
  HyperHeadWeights w;
  if (n > 1) {
    w.fn = b.f32(fn, {n, n * d});
    w.base = b.f32(base, {n});
    w.scale = b.f32(scale, {1});
  }
  return w;
}

LayerWeights bind_block(TensorBinder& b, const HParams& hp, int block, bool with_indexer) {
  const std::string p = "blk." + std::to_string(block) + ".";
  const int64_t d = hp.n_embd, Dh = hp.head_dim, E = hp.n_expert, F = hp.ff_expert, Fs = hp.ff_shared;
  LayerWeights L;
  AttentionWeights& a = L.attn;
  a.norm = b.f32(p + "attn_norm.weight", {d});
  a.q = b.matrix(p + "attn_q.weight", hp.q_rows(), d);
  a.k = b.matrix(p + "attn_k.weight", hp.kv_rows(), d);
  a.v = b.matrix(p + "attn_v.weight", hp.kv_rows(), d);
  a.q_norm = b.f32(p + "attn_q_norm.weight", {Dh});
  a.k_norm = b.f32(p + "attn_k_norm.weight", {Dh});
  a.o = b.matrix(p + "attn_output.weight", d, static_cast<int64_t>(hp.n_head) * Dh);
  const bool idx = with_indexer && hp.indexer_heads > 0;
  const std::string idx_why = with_indexer ? "strata.attention.indexer.head_count = " + std::to_string(hp.indexer_heads)
                                           : "the MTP block never uses the indexer";
  feature_presence(b, p + "indexer.attn_q.weight", idx, idx_why);
  feature_presence(b, p + "indexer.attn_k.weight", idx, idx_why);
  feature_presence(b, p + "indexer.weights.weight", idx, idx_why);
  if (idx) {
    const int64_t Hi = hp.indexer_heads, Di = hp.indexer_dim;
    a.idx_q = b.matrix(p + "indexer.attn_q.weight", Hi * Di, d);
    a.idx_k = b.matrix(p + "indexer.attn_k.weight", Di, d);
    a.idx_w = b.matrix(p + "indexer.weights.weight", Hi, d);
  }
  MoeWeights& m = L.moe;
  m.norm = b.f32(p + "ffn_norm.weight", {d});
  m.router = b.matrix(p + "ffn_gate_inp.weight", E, d);
  m.gate = b.experts(p + "ffn_gate_exps.weight", E, F, d);
  m.up = b.experts(p + "ffn_up_exps.weight", E, F, d);
  m.down = b.experts(p + "ffn_down_exps.weight", E, d, F);
  const std::string sh_why = "strata.expert_shared_feed_forward_length = " + std::to_string(Fs);
  for (const char* t :
       {"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight", "ffn_gate_inp_shexp.weight"})
    feature_presence(b, p + t, Fs > 0, sh_why);
  if (Fs > 0) {
    m.sh_gate = b.matrix(p + "ffn_gate_shexp.weight", Fs, d);
    m.sh_up = b.matrix(p + "ffn_up_shexp.weight", Fs, d);
    m.sh_down = b.matrix(p + "ffn_down_shexp.weight", d, Fs);
    m.sh_gate_inp = b.matrix(p + "ffn_gate_inp_shexp.weight", 1, d);
  }
  L.hc_attn = bind_hc(b, hp, p + "hc_attn");
  L.hc_ffn = bind_hc(b, hp, p + "hc_ffn");
  return L;
}

}  // namespace

void bind_strata(Model& m) {
  HParams& hp = m.hp_;
  TensorBinder b(*m.src_);
  const int64_t d = hp.n_embd;
  const int64_t V = b.rows_of("token_embd.weight");
  if (V <= 0 || V > 0x7FFFFFFF)
    throw_file_error(ErrorKind::Format, b.origin(), "tensor token_embd.weight has " + std::to_string(V) + " rows");
  hp.n_vocab = static_cast<uint32_t>(V);
  m.tok_embd = b.matrix("token_embd.weight", V, d);
  m.output = b.matrix("output.weight", V, d);
  m.output_norm = b.f32("output_norm.weight", {d});
  m.head_hc = bind_head_hc(b, hp, "output_hc_fn.weight", "output_hc_base.weight", "output_hc_scale.weight");
  m.layers.reserve(hp.n_layer);
  for (uint32_t l = 0; l < hp.n_layer; ++l) m.layers.push_back(bind_block(b, hp, static_cast<int>(l), true));
  const std::string mp = "blk." + std::to_string(hp.n_layer) + ".nextn.";
  if (hp.n_nextn == 1) {
    if (hp.mtp_vocab > hp.n_vocab)
      throw_file_error(ErrorKind::Format, b.origin(),
                       "key strata.nextn.vocab_size = " + std::to_string(hp.mtp_vocab) + " exceeds the vocabulary (" +
                           std::to_string(hp.n_vocab) + ")");
    MtpWeights w;
    w.block = bind_block(b, hp, static_cast<int>(hp.n_layer), false);
    w.enorm = b.f32(mp + "enorm.weight", {d});
    w.hnorm = b.f32(mp + "hnorm.weight", {d});
    w.fc_embedding = b.matrix(mp + "fc_embedding.weight", d, d);
    w.fc_hidden = b.matrix(mp + "fc_hidden.weight", d, d);
    w.head_hc = bind_head_hc(b, hp, mp + "hc_head_fn.weight", mp + "hc_head_base.weight", mp + "hc_head_scale.weight");
    w.shared_head_norm = b.f32(mp + "shared_head_norm.weight", {d});
    w.vocab_ids = b.i32(mp + "vocab_ids", hp.mtp_vocab);
    for (uint32_t i = 0; i < hp.mtp_vocab; ++i)
      if (w.vocab_ids[i] < 0 || static_cast<uint32_t>(w.vocab_ids[i]) >= hp.n_vocab)
        throw_file_error(ErrorKind::Format, b.origin(),
                         "tensor " + mp + "vocab_ids[" + std::to_string(i) + "] = " + std::to_string(w.vocab_ids[i]) +
                             " is outside the vocabulary [0, " + std::to_string(hp.n_vocab) + ")");
    m.mtp = w;
  } else if (b.has(mp + "fc_hidden.weight")) {
    throw_file_error(ErrorKind::Format, b.origin(),
                     "tensor " + mp + "fc_hidden.weight is present but strata.nextn_predict_layers = 0");
  }
}

}  // namespace strata::model
