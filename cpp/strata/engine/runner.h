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
// MTP cells carry a validity flag (what the drafter may read) and a write stamp: a write at c marks
// every later cell invalid (as the reference does), rollback(n) invalidates from n (cell n-1 stays
// valid only if the next eval feeds the token it was encoded with at n — a repeated prompt prefix
// keeps its drafter cells), restore()
// invalidates the cells written after the checkpoint, and a draft step refuses (Value error) to read
// an invalid cell — never a silent read of stale K/V.
#include <cstdint>
#include <memory>

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
  int64_t mtp_sink = 64;     // MTP sink cells (STRATA_METAL_MTP_SINK)
  int64_t mtp_window = 256;  // MTP window (STRATA_METAL_MTP_WIN); 0 = every causal cell
  bool encode_mtp = true;    // encode MTP cells during eval (no effect without an MTP layer)
  experts::ExpertStoreConfig experts;  // where the routed experts come from (docs/experts.md)
  routing::MoceParams moce;            // expert selection of the main window
  model::DrafterRequant mtp_requant = model::DrafterRequant::Off;  // R-11 (STRATA_METAL_MTP_Q4 / _Q5)
};

struct RunnerCheckpoint {
  Checkpoint window;
  uint64_t mtp_clock = 0;  // MTP cells written after this are invalid after restore
};

class Runner {
 public:
  Runner(std::unique_ptr<model::Model> model, const RunnerConfig& cfg);
  ~Runner();

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
            int64_t draft_from_row = -1);

  int64_t n_past() const { return window_->n_past(); }
  int64_t n_committed() const { return window_->n_committed(); }
  // Final streams [n][d] of position p when still held (rows of the last run, or the carry); else nullptr.
  const float* streams_at(int64_t p) const;

  void commit(int64_t n);
  void rollback(int64_t n);
  RunnerCheckpoint checkpoint() const { return {window_->checkpoint(), mtp_clock_}; }
  void restore(const RunnerCheckpoint& cp);

  // n_steps chained MTP steps from streams H ([n][d]; nullptr = streams_at(p)) at position p with
  // next token t_{p+1} = next_token. logits_out: [n_steps][Vr] or nullptr; tokens_out: [n_steps].
  void mtp_draft(const float* H, int32_t next_token, int64_t p, int n_steps, float* logits_out, int32_t* tokens_out);
  bool mtp_cell_valid(int64_t c) const;

 private:
  void encode_mtp_rows(const int32_t* tokens, int64_t chunk_start, int rows);
  // Marks cells [c0, c0+n) valid, encoded with next tokens next_tokens[0..n), and every later cell invalid.
  void mtp_wrote(int64_t c0, int64_t n, const int32_t* next_tokens);
  void check_mtp_readable(int64_t p) const;

  std::unique_ptr<model::Model> model_;
  RunnerConfig cfg_;
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
};

}  // namespace strata::engine
