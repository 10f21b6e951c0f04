#pragma once
// One strata block (attention then MoE, each inside its hyper-connection) over R rows at
// positions start .. start+R-1. Used by the main window for every layer and by the MTP drafter for
// its block; qwen3moe is the same with n = 1 and the optional features off.
#include <cstdint>

#include "strata/engine/cell_select.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/rope.h"
#include "strata/engine/scratch.h"
#include "strata/model/hparams.h"
#include "strata/model/ds4_weights.h"
#include "strata/model/weights.h"
#include "strata/routing/router.h"

namespace strata {
class ThreadPool;
}
namespace strata::experts {
class ExpertStore;
}

namespace strata::engine {

struct Ds4State;

struct BlockContext {
  const model::HParams* hp = nullptr;
  const model::LayerWeights* w = nullptr;
  KvCells* kv = nullptr;
  int kv_layer = 0;          // layer index inside kv
  CellPolicy policy;         // which cells a row attends to
  bool use_indexer = false;  // compute and cache indexer keys, pick top-T with them
  const Rope* rope = nullptr;
  Scratch* s = nullptr;
  ThreadPool* pool = nullptr;
  // Expert selection (routing/router.h): defaults give plain top-K by probability.
  routing::MoceParams moce;
  const uint8_t* resident = nullptr;  // E bytes for this layer, nonzero = resident; nullptr = no map
  int draft_from_row = -1;            // rows >= this are draft rows of a verification window; -1 = none
  // Rows >= this (>= 1) may be cut from a window at the first MoE layer where they would read an expert
  // that is neither resident nor read for an earlier row (routing::window_rows_kept); -1 = never.
  int cut_from_row = -1;
  // The drafter's rows in stream mode (STRATA_MOCE_DRAFTER_RESIDENT): softmax-gated rows pick their top-K
  // among the resident experts when at least K are resident, so a draft step reads none. Drafts may be
  // anything without changing the verified text; only their acceptance moves.
  bool resident_only = false;
  // Where the routed experts' weights come from (experts/expert_store.h); nullptr = the mmap views.
  experts::ExpertStore* experts = nullptr;
  int expert_layer = 0;  // this block's layer in the store (main layers, then the MTP)
  // The next block's MoE weights when the store prefetches (stream mode, STRATA_EXPERT_PREFETCH): its
  // router runs on this layer's MoE input, and the experts it ranks top-K for the rows are read while
  // this layer computes (docs/experts.md, "Prefetch"). nullptr = none.
  const model::MoeWeights* next_moe = nullptr;
  // An explicit attended list for a single-row run (ascending ids <= the row's position, at most
  // the scratch's max_list entries) instead of `policy`: the drafter's own cell bookkeeping.
  const int32_t* cell_list = nullptr;
  int64_t cell_list_n = 0;
  // deepseek4 (docs/models.md): its per-position state and working memory, the layer's attention
  // weights (the attention half is ds4_attention_forward), the rows' token ids (hash-routed layers
  // pick their experts by token) and the layer's SwiGLU limits of the routed / shared experts (0 = none).
  Ds4State* ds4 = nullptr;
  const model::Ds4AttentionWeights* ds4_attn = nullptr;
  const int32_t* tokens = nullptr;
  float clamp_exp = 0.0f;
  float clamp_shexp = 0.0f;
};

// X: [R][n][d] streams, updated in place. Returns the rows the block kept: R, or fewer when
// c.cut_from_row cut the window in its MoE (the rows after it are left as they were mid-block).
int run_block(const BlockContext& c, float* X, int R, int64_t start);

// The pieces (tests and the MTP reuse them).
// Hyper-connection entry: coefficients (s.pre/post/comb) and the collapsed input (s.collapsed);
// n = 1: collapsed = X, post = comb = 1.
void hc_enter(const model::HParams& hp, const model::HyperConnWeights& hc, const float* X, int R, Scratch& s,
              ThreadPool* pool);
// Attention sub-layer: s.xn -> s.out (writes K/V and indexer keys of the R rows).
void attention_forward(const BlockContext& c, int R, int64_t start);
// deepseek4's attention sub-layer (engine/ds4_attention.cpp): s.xn -> s.out, writing the rows' K = V
// and compressor cells and the compressed entries whose windows the rows close.
void ds4_attention_forward(const BlockContext& c, int R, int64_t start);
// Its K = V cells alone (a sliding-window layer: the drafter's encode; others run the whole sub-layer).
void ds4_attention_write_kv(const BlockContext& c, int R, int64_t start);
// Its first part alone: the K/V (and indexer keys) of the R rows from s.xn, written to their cells.
void attention_write_kv(const BlockContext& c, int R, int64_t start);
// K/V-only rows ("catch-up"): the hyper-connection collapse, attn_norm and attention_write_kv; the
// streams are not changed. Writes exactly the bytes run_block would write to the cells.
void write_block_kv(const BlockContext& c, const float* X, int R, int64_t start);
// MoE sub-layer: s.xn -> s.routed, s.weights, s.shared, s.shared_gate. Returns the rows it ran (R, or
// fewer when c.cut_from_row cut the window).
int moe_forward(const BlockContext& c, int R);
// Dense FFN sub-layer of a layer without experts (glm4moe's leading layers): s.xn -> s.out.
void dense_ffn_forward(const BlockContext& c, int R);
// HyperHead (or n = 1: identity) then RMSNorm_w: rows of X -> out [R][d].
void head_input(const model::HParams& hp, const model::HyperHeadWeights& head, const float* norm_w, const float* X,
                int R, Scratch& s, float* out, ThreadPool* pool);

}  // namespace strata::engine
