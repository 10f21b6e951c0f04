#pragma once
// The attention weights of a deepseek4 layer (docs/models.md, deepseek4): low-rank q, one shared
// K = V head, per-head sinks, the grouped low-rank output and, in the compressed layers, the
// compressor (and in CSA layers the lightning indexer with a compressor of its own). The MoE half
// lives in LayerWeights::moe like every other family's.
#include <cstdint>

#include "strata/model/weights.h"

namespace strata::model {

// One compressor: per token kv and gate projections of width coff·dim (coff = 2 for the
// overlapping CSA windows, 1 for HCA), per-slot gate bias ape [ratio][coff·dim] and the RMSNorm
// of the pooled entry [dim].
struct Ds4CompressorWeights {
  Weight kv, gate;
  const float* ape = nullptr;
  const float* norm = nullptr;
  int ratio = 0;
  int dim = 0;
  int coff = 1;
  bool present() const { return ratio > 0; }
};

struct Ds4AttentionWeights {
  int ratio = 0;                    // 0 sliding window only, 4 CSA, 128 HCA
  const float* sinks = nullptr;     // [Hq] softmax sink logits
  Weight q_a;                       // [q_lora, d]
  const float* q_a_norm = nullptr;  // [q_lora]
  Weight q_b;                       // [Hq·Dh, q_lora]
  Weight kv;                        // [Dh, d]
  const float* kv_norm = nullptr;   // [Dh]
  Weight o_a;                       // [G·o_lora, Hq·Dh/G]: group g's rows g·o_lora ..
  Weight o_b;                       // [d, G·o_lora]
  Ds4CompressorWeights comp;        // ratio > 0
  Weight idx_proj;                  // CSA: [Hi, d] per-head weights of the indexer
  Weight idx_q_b;                   // CSA: [Hi·Di, q_lora]
  Ds4CompressorWeights idx_comp;    // CSA: at Di
};

// deepseek4's MTP layer from llama.cpp's separate MTP file (docs/models.md, "The MTP layer"): the
// block's attention (always the sliding-window branch, as llama.cpp's graph_mtp runs it: ratio 0,
// any compressor tensors of the file left unbound) and the block's SwiGLU limits. The rest of the
// layer is Model::mtp.
struct Ds4MtpWeights {
  Ds4AttentionWeights attn;
  float clamp_exp = 0.0f, clamp_shexp = 0.0f;
};

}  // namespace strata::model
