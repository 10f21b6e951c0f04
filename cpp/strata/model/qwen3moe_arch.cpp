// Weight binding of llama.cpp's `qwen3moe` architecture: strata with every optional feature off
// (n = 1, ungated, full causal attention, no indexer, no shared expert, no MTP, f32 K/V).
#include <string>

#include "strata/model/model.h"
#include "strata/model/tensor_binder.h"
#include "strata/util/error.h"

namespace strata::model {

void bind_qwen3moe(Model& m) {
  HParams& hp = m.hp_;
  TensorBinder b(*m.src_);
  const int64_t d = hp.n_embd, Dh = hp.head_dim, E = hp.n_expert, F = hp.ff_expert;
  const int64_t V = b.rows_of("token_embd.weight");
  if (V <= 0 || V > 0x7FFFFFFF)
    throw_file_error(ErrorKind::Format, b.origin(), "tensor token_embd.weight has " + std::to_string(V) + " rows");
  hp.n_vocab = static_cast<uint32_t>(V);
  m.tok_embd = b.matrix("token_embd.weight", V, d);
  // Tied embeddings: llama.cpp falls back to token_embd when output.weight is absent.
  m.output = b.has("output.weight") ? b.matrix("output.weight", V, d) : m.tok_embd;
  m.output_norm = b.f32("output_norm.weight", {d});
  m.layers.reserve(hp.n_layer);
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    AttentionWeights& a = L.attn;
    a.norm = b.f32(p + "attn_norm.weight", {d});
    a.q = b.matrix(p + "attn_q.weight", hp.q_rows(), d);
    a.k = b.matrix(p + "attn_k.weight", hp.kv_rows(), d);
    a.v = b.matrix(p + "attn_v.weight", hp.kv_rows(), d);
    a.q_norm = b.f32(p + "attn_q_norm.weight", {Dh});
    a.k_norm = b.f32(p + "attn_k_norm.weight", {Dh});
    a.o = b.matrix(p + "attn_output.weight", d, static_cast<int64_t>(hp.n_head) * Dh);
    MoeWeights& mo = L.moe;
    mo.norm = b.f32(p + "ffn_norm.weight", {d});
    mo.router = b.matrix(p + "ffn_gate_inp.weight", E, d);
    mo.gate = b.experts(p + "ffn_gate_exps.weight", E, F, d);
    mo.up = b.experts(p + "ffn_up_exps.weight", E, F, d);
    mo.down = b.experts(p + "ffn_down_exps.weight", E, d, F);
    if (b.has(p + "ffn_gate_shexp.weight"))
      throw_file_error(ErrorKind::Format, b.origin(),
                       "tensor " + p +
                           "ffn_gate_shexp.weight is present: qwen3moe has no shared expert "
                           "(a qwen2moe file?)");
    m.layers.push_back(L);
  }
}

}  // namespace strata::model
