#pragma once
// The hyper-parameters of a model, read from its metadata and validated once at load (docs/gguf.md).
// One struct for every architecture: qwen3moe and glm4moe are strata with features off (glm4moe adds
// leading dense layers, attention biases and sigmoid routing with an expert score bias).
#include <cstdint>
#include <string>

#include "strata/model/ds4_hparams.h"
#include "strata/model/model_source.h"

namespace strata::model {

enum class Arch { Strata, Qwen3Moe, Glm4Moe, DeepSeek4 };
// How router logits become expert scores: softmax (strata, qwen3moe), sigmoid plus a per-expert
// selection bias (glm4moe, docs/gguf.md §4) or sqrt(softplus) plus that bias (deepseek4).
enum class Gating { Softmax, Sigmoid, SqrtSoftplus };
// How K/V cells are stored: int8 with one fp16 scale per 64 elements (the strata format's own), f32, or
// fp16 (llama.cpp's default cache type: half of f32's bytes, the attention arithmetic in f32).
enum class KvType { Int8, F32, F16 };
const char* kv_type_name(KvType t);

struct HParams {
  Arch arch = Arch::Strata;
  std::string arch_name;
  uint32_t context_length = 0;
  uint32_t n_embd = 0;     // d
  uint32_t n_vocab = 0;    // V: rows of token_embd (filled by the weight binding)
  uint32_t n_block = 0;    // block_count as stored (main layers + nextn layers)
  uint32_t n_layer = 0;    // L main layers
  uint32_t n_nextn = 0;    // 0 or 1 MTP layers
  uint32_t n_head = 0;     // Hq
  uint32_t n_head_kv = 0;  // Hkv
  uint32_t head_dim = 0;   // Dh
  float rms_eps = 1e-6f;
  bool attn_gated = false;
  uint32_t sink_count = 0;      // S
  uint32_t sliding_window = 0;  // W (0 = full causal attention)
  uint32_t indexer_heads = 0;   // Hi (0 = no indexer)
  uint32_t indexer_dim = 0;     // Di
  uint32_t indexer_top_k = 0;   // T
  float rope_base = 10000.0f;
  uint32_t rope_dim = 0;       // rotated dims per head, NEOX pairing
  uint32_t n_expert = 0;       // E
  uint32_t n_expert_used = 0;  // K
  uint32_t ff_expert = 0;      // F
  uint32_t ff_shared = 0;      // Fs (0 = no shared expert)
  uint32_t hc_count = 1;       // n streams
  uint32_t hc_sinkhorn_iters = 0;
  float hc_eps = 0.0f;
  uint32_t mtp_vocab = 0;  // Vr (when n_nextn = 1)
  KvType kv_type = KvType::Int8;
  // glm4moe (defaults keep strata and qwen3moe unchanged).
  uint32_t n_dense_lead = 0;  // leading layers with a dense SwiGLU FFN instead of the MoE
  uint32_t ff_dense = 0;      // their width (feed_forward_length)
  Gating gating = Gating::Softmax;
  bool expert_weights_norm = true;    // renormalise the selected experts' weights
  float expert_weights_scale = 1.0f;  // routed_scaling_factor, applied after the renormalisation
  Ds4HParams ds4;                     // deepseek4 only (model/ds4_hparams.h)

  // Derived helpers.
  uint32_t q_rows() const { return n_head * head_dim * (attn_gated ? 2u : 1u); }
  uint32_t kv_rows() const { return n_head_kv * head_dim; }
  bool uses_indexer() const { return indexer_heads > 0 && sliding_window > 0; }
  bool dense_layer(uint32_t l) const { return l < n_dense_lead; }
  // A MoE layer's index among the layers that have experts (the expert store's layer numbering);
  // the MTP block, when present, follows the main model's MoE layers.
  uint32_t expert_layer(uint32_t l) const { return l - n_dense_lead; }
  uint32_t moe_layers() const { return n_layer - n_dense_lead; }
};

// Reads and validates the hyper-parameters of `src` for its general.architecture. Unknown
// architectures, missing keys and inconsistent values are Format errors naming the key.
HParams read_hparams(const ModelSource& src);

// Checks the relations between hyper-parameters (called by read_hparams; public for tests).
void validate_hparams(const HParams& hp, const std::string& origin);

const char* arch_name(Arch a);

}  // namespace strata::model
