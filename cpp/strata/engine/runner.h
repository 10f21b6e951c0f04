#pragma once
// One sequence through the main model and its MTP drafter: the object the Python bindings expose,
// and the behaviour the PyTorch ReferenceRunner mirrors (python/strata_train/runner.py).
//
// eval() streams rows through the Window in chunks; after each chunk, when the model has an MTP
// layer and encode_mtp is on, it encodes the MTP cell of every position whose next token became
// known (start-1 .. start+n-2: streams of q with token q+1). The streams of start-1 come from the
// previous run's rows (still held by the Window) or a one-row carry; when neither holds them (after
// a rollback further back than the last run) that MTP cell stays invalid.
//
// The drafter's cells (SPEC §2.6, R-9) are kept twice, on purpose:
//  - draft::DraftCells cells_ decides what a draft row reads: the sink prefix and the valid run
//    through wrote(c0, n), following its protocol (docs/drafting.md): an eval from p0 calls
//    wrote(p0, 0) first, committed rows the drafter encodes are reported with wrote(c0, n), a chain's
//    speculative cells are not reported. A draft row at cell pos attends to exactly
//    draft_row_cells(pos) = sinks ++ [max(run_begin, pos - W), pos] (W = mtp_window: W + 1 cells),
//    checked with check_reads() before it runs.
//  - a ledger (per cell: holds committed drafter K/V for this sequence, the write stamp, the next
//    token it was encoded with), updated by what is actually written, against which every cell a
//    draft row reads is checked too: a read of a cell without committed K/V that is not one of the
//    chain's own cells throws Internal — the R-9 invariant checked while the real drafter runs.
// rollback(n) keeps cell n-1 (it is committed when the next eval feeds the same token at n, and a
// draft round from n-1 rewrites it anyway); restore() drops what was written after the checkpoint.
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/draft/draft_cells.h"
#include "strata/engine/decode_target.h"
#include "strata/engine/mtp.h"
#include "strata/experts/expert_store.h"
#include "strata/engine/window.h"
#include "strata/model/drafter_requant.h"
#include "strata/model/model.h"
#include "strata/util/aligned.h"

namespace strata {
class ThreadPool;
}

namespace strata::engine {

struct RunnerConfig {
  int n_threads = 0;         // 0 = the global pool; > 0 = a pool of this many threads of its own
  int64_t max_ctx = 0;       // cells; 0 = min(context_length, 32768)
  int max_rows = 512;        // rows per chunk
  int64_t mtp_sink = 64;     // drafter sink cells (STRATA_METAL_MTP_SINK, 0..1024)
  int64_t mtp_window = 256;  // drafter window (STRATA_METAL_MTP_WIN, 1..2051): a draft row reads W + 1 cells
  bool encode_mtp = true;    // encode MTP cells during eval (no effect without an MTP layer)
  experts::ExpertStoreConfig experts;  // where the routed experts come from (docs/experts.md)
  routing::MoceParams moce;            // expert selection of the main window
  model::DrafterRequant mtp_requant = model::DrafterRequant::Off;  // R-11 (STRATA_METAL_MTP_Q4 / _Q5)
};

struct RunnerCheckpoint {
  Checkpoint window;
  uint64_t mtp_clock = 0;   // MTP cells written after this are invalid after restore
  draft::DraftCells cells;  // the drafter's sink and run at the checkpoint
};

class Runner final : public DecodeTarget {
 public:
  Runner(std::unique_ptr<model::Model> model, const RunnerConfig& cfg);
  ~Runner() override;

  const model::Model& model() const { return *model_; }
  const model::HParams& hparams() const { return model_->hparams(); }
  Window& window() { return *window_; }
  const Window& window() const { return *window_; }
  bool has_mtp() const { return mtp_ != nullptr; }
  Mtp& mtp();
  const RunnerConfig& config() const { return cfg_; }
  experts::ExpertStore& expert_store() { return *experts_; }
  void set_moce(const routing::MoceParams& p) { window_->set_moce(p); }

  // Runs tokens[0..n) at positions start.. (start <= n_past). logits_out: nullptr, V floats
  // (LogitRows::Last: the last row) or n·V floats (LogitRows::All). draft_from_row >= 0: rows >= it
  // (0-based in tokens) are draft rows of a verification window, routed with the MOCE draft
  // parameters when the draft flag is on; -1 = none.
  void eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
            int64_t draft_from_row) override;
  void eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out) {
    eval(tokens, n, start, which, logits_out, -1);
  }

  int64_t n_past() const override { return window_->n_past(); }
  int64_t max_ctx() const override { return window_->max_ctx(); }
  int n_vocab() const override { return static_cast<int>(hparams().n_vocab); }
  bool has_drafter() const override { return has_mtp(); }
  int draft_vocab() const override { return mtp_ ? mtp_->vocab_size() : 0; }
  const int32_t* draft_vocab_ids() const override { return mtp_ ? mtp_->vocab_ids() : nullptr; }
  int64_t n_committed() const { return window_->n_committed(); }
  // Final streams [n][d] of position p when still held (rows of the last run, or the carry); else nullptr.
  const float* streams_at(int64_t p) const;

  void commit(int64_t n);
  void rollback(int64_t n) override;
  RunnerCheckpoint checkpoint() const { return {window_->checkpoint(), mtp_clock_, cells_}; }
  void restore(const RunnerCheckpoint& cp);

  // n_steps chained MTP steps from streams H ([n][d]; nullptr = streams_at(p)) at position p with
  // next token t_{p+1} = next_token. logits_out: [n_steps][Vr] or nullptr; tokens_out: [n_steps].
  void mtp_draft(const float* H, int32_t next_token, int64_t p, int n_steps, float* logits_out, int32_t* tokens_out);
  // Whether drafter cell c holds committed K/V a draft row may read (both books agree).
  bool mtp_cell_valid(int64_t c) const;
  const draft::DraftCells& draft_cells() const { return cells_; }

  // DecodeTarget's drafter: a chain from the held streams of p (draft_begin) or from H.
  bool draft_ready(int64_t p) const override { return mtp_ != nullptr && streams_at(p) != nullptr; }
  void draft_begin(int64_t p, int32_t next_token) override { draft_begin_from(nullptr, p, next_token); }
  void draft_begin_from(const float* H, int64_t p, int32_t next_token);
  int32_t draft_step(float* logits_out) override;
  void set_drafter_encoding(bool on) override { cfg_.encode_mtp = on && encode_allowed_; }

 private:
  void encode_mtp_rows(const int32_t* tokens, int64_t chunk_start, int rows);
  // Marks cells [c0, c0+n) valid, encoded with next tokens next_tokens[0..n), and every later cell invalid.
  void mtp_wrote(int64_t c0, int64_t n, const int32_t* next_tokens);
  void ledger_invalidate(int64_t from);
  void check_ledger(int64_t pos, int chain_step) const;

  std::unique_ptr<model::Model> model_;
  RunnerConfig cfg_;
  bool encode_allowed_ = true;  // cfg.encode_mtp at construction: set_drafter_encoding never exceeds it
  std::unique_ptr<ThreadPool> own_pool_;
  std::unique_ptr<experts::ExpertStore> experts_;  // before the window and MTP that use it
  std::unique_ptr<Window> window_;
  std::unique_ptr<Mtp> mtp_;
  AlignedBuffer<float> carry_;      // [n][d] streams of position carry_pos_
  int64_t carry_pos_ = -1;
  AlignedBuffer<float> mtp_in_;     // [max_rows][n][d] MTP input streams
  AlignedBuffer<int32_t> mtp_tok_;  // [max_rows]
  AlignedBuffer<uint8_t> mtp_valid_;    // [max_ctx]
  AlignedBuffer<uint64_t> mtp_stamp_;   // [max_ctx] MTP write counter when the cell was written
  AlignedBuffer<int32_t> mtp_next_;     // [max_ctx] the next token each MTP cell was encoded with
  uint64_t mtp_clock_ = 0;              // counts MTP writes
  draft::DraftCells cells_;             // what draft rows read
  std::vector<int32_t> list_;           // a draft row's cells (capacity sink + window + 1)
  int64_t chain_pos_ = -1;              // the draft chain's committed row; -1 = no chain
  int chain_step_ = 0;                  // the chain's next step
  int32_t chain_token_ = 0;             // the chain's next input token
};

}  // namespace strata::engine
