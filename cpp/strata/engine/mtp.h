#pragma once
// The MTP drafter's forward pass (docs/gguf.md §2 "MTP step", SPEC §1.1 and §2.6). A row at
// position p combines input streams H (the main model's final streams at p, or the MTP's own output
// streams for chained steps) with the embedding of the next token:
//   e = fc_embedding @ RMSNorm_enorm(Emb[t']);  X_s = e + fc_hidden @ RMSNorm_hnorm(H_s)
// (fc_hidden over the n streams of all rows is ONE gemm — R-10), then block M attends to the MTP's
// own int8 KV cells — sinks + window only, never indexer state — and the MTP HyperHead, norm
// and restricted-vocab head give draft logits over vocab_ids.
// glm4moe's nextn layer runs here too (n = 1, docs/gguf.md §4): fc_embedding / fc_hidden are the
// halves of its eh_proj, H is first RMSNorm-ed with output_norm (MtpState::Main) or
// shared_head_norm (MtpState::Chained), and its embedding / head may be the layer's own tables.
//
// The restricted head: the rows output.weight[vocab_ids] are gathered once at construction into a
// contiguous matrix (same type, bytes copied), so a draft step is one GEMV over Vr rows. When
// vocab_ids is one ascending run of consecutive ids, a view into output.weight is used instead.
//
// deepseek4's MTP layer (llama.cpp's separate MTP file, docs/models.md) runs here too: the same
// glue as strata's (eh_proj's halves as fc_embedding / fc_hidden, no state norm), its block is a
// deepseek4 block whose attention is the sliding-window branch over the MTP's own K = V cells
// (sinks, no compressor; Ds4State of that one layer), its experts come through the expert store as
// its last layer (read from the MTP file), and the MTP's own hyper-connection head feeds the shared head.
// Its window is the model's sliding_window: a list from run_row contributes only its cells in it.
//
// Cells: an MTP row at position p writes MTP cell p. Which cells hold valid MTP K/V (the rows the
// drafter has encoded) is the caller's bookkeeping (draft cells, R-9; engine/runner.h keeps a
// guard of its own): a row reads cells <= p from the sink and window ranges (run), or exactly the
// list the caller gives (run_row). Encoding committed rows needs only their K/V (encode).
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/engine/block.h"
#include "strata/engine/cell_select.h"
#include "strata/engine/ds4_state.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/rope.h"
#include "strata/engine/scratch.h"
#include "strata/model/model.h"
#include "strata/util/aligned.h"

namespace strata {
class ThreadPool;
}
namespace strata::experts {
class ExpertStore;
}

namespace strata::engine {

// Where a row's input state H comes from: the main model's final streams, or the previous chain
// step's own output streams. strata treats both alike; glm4moe normalises them with different
// weights before hnorm (output_norm / shared_head_norm, docs/gguf.md §4).
enum class MtpState { Main, Chained };

struct MtpConfig {
  int64_t sink = 64;                        // sink cells (0 = none)
  int64_t window = 256;                     // window cells (0 = every causal cell)
  int64_t max_ctx = 0;                      // cells; 0 = min(context_length, 32768)
  int max_rows = 512;                       // rows per run (encoding a prompt chunk)
  ThreadPool* pool = nullptr;               // nullptr = ThreadPool::global()
  experts::ExpertStore* experts = nullptr;  // not owned; nullptr = the mmap views
  int expert_layer = 0;                     // the MTP block's layer in the store (= the MoE layers' count)
  // Stream mode: draft rows route among the resident experts (BlockContext::resident_only).
  bool resident_only = false;
  // A restricted-vocabulary head gathered from scattered output rows (strata's nextn vocab_ids) is a copy
  // of its own: stored wider than Q4_0 (Q8_0 in the demo model), it is requantized to Q4_0 (ggml's rule)
  // and repacked. A draft step reads it whole (~40 % of the step), and only the drafts can change: the
  // verifier's head is untouched, so the output is exact either way. Views of the main head stay as they are.
  // Off here (the file's head, what the reference tests check); the product's setting turns it on
  // (config::MtpCellSettings::draft_q4, STRATA_METAL_MTP_DRAFT_Q4 = 1 by default).
  bool head_q4 = false;
};

class Mtp {
 public:
  // scratch: a Scratch to share (the main window's, created with extra_list >= sink + window + 1
  // and at least max_rows rows); nullptr = own one.
  Mtp(const model::Model& m, const MtpConfig& cfg, Scratch* scratch = nullptr);

  int vocab_size() const { return static_cast<int>(m_.hparams().mtp_vocab); }
  const int32_t* vocab_ids() const { return m_.mtp->vocab_ids; }
  int64_t sink() const { return policy_.sink; }
  int64_t window() const { return policy_.window; }
  int max_rows() const { return max_rows_; }
  int max_logit_rows() const { return max_logit_rows_; }
  const KvCells& kv() const { return kv_; }

  // Runs m rows: row r at position pos0 + r with input streams H + r·n·d and next token tokens[r].
  // Writes MTP cells pos0 .. pos0+m-1; each row attends by the sink/window policy. With want_logits
  // (m <= max_logit_rows), also the draft logits of every row.
  void run(const float* H, const int32_t* tokens, int m, int64_t pos0, bool want_logits, MtpState src = MtpState::Main);
  // K/V-only rows (the drafter encoding committed positions): the same cell bytes as run() writes,
  // without the attention read, MoE and head. out_streams/draft_logits are not produced.
  void encode(const float* H, const int32_t* tokens, int m, int64_t pos0);
  // One row at pos attending to an explicit ascending list of cells (<= pos, at most
  // sink + window + 1 of them; e.g. from draft::DraftCells::draft_row_cells) instead of the policy.
  void run_row(const float* H, int32_t token, int64_t pos, const int32_t* cells, int64_t n_cells, bool want_logits,
               MtpState src = MtpState::Main);

  // Results of the last run.
  const float* out_streams(int r) const;   // [n][d] before the HyperHead
  const float* draft_logits(int r) const;  // [Vr]
  int32_t draft_token(int r) const;        // vocab_ids[argmax] (ties to the lower index)
  // The restricted head's storage type (MtpConfig::head_q4: Q4_0 / Q4_0_R16 for a gathered wider head).
  quant::GGMLType head_type() const { return head_.type; }

  // A chain of n_steps draft steps from streams H at position p and next token t = t_{p+1}:
  // step j runs at position p + j with the previous step's output streams and draft token.
  // logits_out: [n_steps][Vr] (may be nullptr); tokens_out: [n_steps].
  void draft_chain(const float* H, int32_t token, int64_t p, int n_steps, float* logits_out, int32_t* tokens_out);

 private:
  void check_rows(const int32_t* tokens, int m, int64_t pos0, bool want_logits) const;
  void prepare_inputs(const float* H, const int32_t* tokens, int m, MtpState src);
  BlockContext context();
  void finish(int m, bool want_logits);

  const model::Model& m_;
  ThreadPool* pool_;
  experts::ExpertStore* experts_;
  int expert_layer_;
  bool resident_only_;
  int max_rows_;
  int max_logit_rows_;
  int64_t max_ctx_;
  CellPolicy policy_;
  KvCells kv_;
  Rope rope_;
  std::unique_ptr<Scratch> own_scratch_;
  Scratch* s_;
  model::Weight head_;                                  // [Vr, d] restricted-vocab head
  std::vector<uint8_t> head_copy_;                      // gathered rows when vocab_ids is not one run
  ScratchBuffer<float> emb_;                            // [R][d] embeddings -> normed -> e
  ScratchBuffer<float> hn_;                             // [R][n][d] normed input streams -> fc_hidden outputs
  ScratchBuffer<float> x_;                              // [R][n][d] block streams
  ScratchBuffer<float> logits_;                         // [R][Vr]
  ScratchBuffer<float> chain_streams_;                  // [n][d]
  std::vector<model::Ds4AttentionWeights> ds4_layers_;  // deepseek4: the MTP block's attention
  std::unique_ptr<Ds4State> ds4_;                       // deepseek4: its K = V cells and working memory
  int last_rows_ = 0;
  bool last_logits_ = false;
};

}  // namespace strata::engine
