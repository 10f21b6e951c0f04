#pragma once
// Weight views into the model source's memory (the mmap of a GGUF file): no copies. A Weight is
// a row-major matrix [rows, cols] of one ggml type; ExpertWeights is a stack of E such matrices
// (a GGUF 3-D tensor [E, rows, cols]) whose expert e is a contiguous slice: in the file the slices
// follow one another; in the repacked copy (model/weight_repack.h) an expert's gate and up slices
// lie side by side, so the stack's slices are two slices apart.
#include <cstddef>
#include <cstdint>

#include "strata/quant/types.h"

namespace strata::model {

struct Weight {
  quant::GGMLType type = quant::GGMLType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  std::size_t row_stride = 0;  // bytes per row

  bool present() const { return data != nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<std::size_t>(r) * row_stride; }
  // Rows [r0, r0 + n) as a weight of their own.
  Weight rows_slice(int64_t r0, int64_t n) const { return Weight{type, row(r0), n, cols, row_stride}; }
};

struct ExpertWeights {
  quant::GGMLType type = quant::GGMLType::F32;
  const uint8_t* data = nullptr;
  int64_t n_expert = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::size_t row_stride = 0;
  std::size_t expert_stride = 0;  // bytes per expert = rows * row_stride
  std::size_t expert_step = 0;    // bytes from one expert's slice to the next; 0 = expert_stride

  std::size_t step() const { return expert_step != 0 ? expert_step : expert_stride; }
  // Bytes from the first slice's start to the last one's end.
  std::size_t span_bytes() const {
    return n_expert > 0 ? static_cast<std::size_t>(n_expert - 1) * step() + expert_stride : 0;
  }
  Weight expert(int64_t e) const {
    return Weight{type, data + static_cast<std::size_t>(e) * step(), rows, cols, row_stride};
  }
};

// One hyper-connection (docs/gguf.md §2): fn [(2+n)·n, n·d], base [(2+n)·n], scale [3], all F32.
struct HyperConnWeights {
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
  bool present() const { return fn != nullptr; }
};

// A HyperHead: fn [n, n·d], base [n], scale [1], all F32.
struct HyperHeadWeights {
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
  bool present() const { return fn != nullptr; }
};

struct AttentionWeights {
  const float* norm = nullptr;    // attn_norm [d]
  Weight q, k, v, o;              // attn_q [Hq·Dh·(1|2), d], attn_k/v [Hkv·Dh, d], attn_output [d, Hq·Dh]
  const float* q_norm = nullptr;  // [Dh]; glm4moe: optional (nullptr = no q norm)
  const float* k_norm = nullptr;  // [Dh]; glm4moe: optional
  const float* q_bias = nullptr;  // glm4moe: optional projection biases [Hq·Dh], [Hkv·Dh], [Hkv·Dh]
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  Weight idx_q, idx_k, idx_w;  // indexer (absent when Hi = 0 and in the MTP block)
};

struct MoeWeights {
  const float* norm = nullptr;                  // ffn_norm [d]
  Weight router;                                // ffn_gate_inp [E, d]
  ExpertWeights gate, up, down;                 // [E, F, d], [E, F, d], [E, d, F]
  Weight sh_gate, sh_up, sh_down, sh_gate_inp;  // shared expert (absent when Fs = 0); sh_gate_inp absent =
                                                // the shared expert is added ungated (glm4moe)
  const float* score_bias = nullptr;            // [E] sigmoid routing's selection bias (glm4moe exp_probs_b)
  const int32_t* tid2eid = nullptr;             // [V][K] deepseek4's hash-routed layers: experts by token id
};

// A dense SwiGLU FFN (glm4moe's leading layers): down(silu(gate x) ⊙ up x), norm = ffn norm [d].
struct DenseFfnWeights {
  const float* norm = nullptr;
  Weight gate, up, down;  // [Fd, d], [Fd, d], [d, Fd]
  bool present() const { return gate.present(); }
};

struct LayerWeights {
  AttentionWeights attn;
  MoeWeights moe;                    // absent (router not present) in a dense layer
  DenseFfnWeights dense;             // present only in glm4moe's leading dense layers
  HyperConnWeights hc_attn, hc_ffn;  // absent when n = 1
};

struct MtpWeights {
  LayerWeights block;
  const float* enorm = nullptr;
  const float* hnorm = nullptr;
  Weight fc_embedding, fc_hidden;  // [d, d]
  HyperHeadWeights head_hc;        // absent when n = 1
  const float* shared_head_norm = nullptr;
  const int32_t* vocab_ids = nullptr;  // [Vr], each < V
  // glm4moe's nextn layer (absent for strata): fc_embedding / fc_hidden are the two column halves of
  // eh_proj [d, 2d]; the incoming state H is RMSNorm-ed before hnorm — with output_norm when it is
  // the main model's (state_norm_main), with shared_head_norm when it is a chained step's own
  // output (state_norm_chain); the embedding and head may have their own tables.
  const float* state_norm_main = nullptr;
  const float* state_norm_chain = nullptr;
  Weight embd;  // nextn.embed_tokens [V, d]; absent = token_embd
  Weight head;  // nextn.shared_head_head [V, d]; absent = output
};

}  // namespace strata::model
