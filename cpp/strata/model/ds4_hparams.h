#pragma once
// The hyper-parameters only llama.cpp's `deepseek4` (DeepSeek-V4) has (docs/models.md, deepseek4):
// low-rank q, the grouped low-rank output, the per-layer compression ratio of the attention
// (0 = sliding window only, 4 = CSA with the lightning indexer, 128 = HCA), the compressed layers'
// RoPE (own base, optional YaRN), the hash-routed leading layers and the SwiGLU clamps.
#include <cstdint>
#include <vector>

namespace strata::model {

// YaRN frequency interpolation (transformers' _compute_yarn_parameters with truncate = true and
// attention factor 1, as DeepSeek-V4 configures it).
struct YarnParams {
  bool on = false;
  float factor = 1.0f;
  uint32_t original_context = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

struct Ds4HParams {
  uint32_t q_lora = 0;                   // rank of the low-rank query
  uint32_t o_groups = 0;                 // head groups of the grouped output projection
  uint32_t o_lora = 0;                   // each group's projected width
  uint32_t window = 0;                   // sliding window: the last `window` positions, the query's own included
  std::vector<uint32_t> compress_ratio;  // [n_block] 0, 4 (CSA) or 128 (HCA)
  float compress_rope_base = 160000.0f;  // RoPE base of the CSA / HCA layers
  YarnParams yarn;                       // applies to the CSA / HCA layers only
  uint32_t idx_heads = 0, idx_dim = 0, idx_top_k = 0;  // the lightning indexer (CSA layers)
  uint32_t hash_layers = 0;                            // leading layers routed by ffn_gate_tid2eid
  std::vector<float> clamp_exp, clamp_shexp;           // [n_block] SwiGLU limits (0 = none)

  bool hashed(uint32_t layer) const { return layer < hash_layers; }
};

}  // namespace strata::model
