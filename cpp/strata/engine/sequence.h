#pragma once
// One sequence through a main model and its MTP drafter, on any backend (engine/sequence_backend.h):
// the one owner of a sequence's state and of the decode protocol. Backends run rows; this class
// decides which rows, in which chunks, what the drafter encodes and reads, and what survives a
// rollback, commit or restore. draft::Speculator drives it; the Python `Engine` wraps it.
//
// Lengths: n_past = cells holding the main model's K/V, n_committed <= n_past the prefix commit()
// fixed. eval(tokens, n, start) runs them at positions start.. (start <= n_past) in chunks of the
// backend's max_rows (max_logit_rows with every row's logits); each main cell records the write
// clock, so a checkpoint whose cells were rewritten since is refused (restore is exact or nothing).
//
// The drafter's cells (SPEC §2.6, rule R-9: a draft row at cell pos reads the sink cells and the
// window [pos − W, pos], and only cells holding committed drafter K/V of the current tokens):
//  - after each chunk, with encode_mtp on, the drafter encodes the K/V of every row whose next token
//    became known (start−1 .. start+n−2: streams of q with token q+1). The streams of start−1 come
//    from the previous run's rows or a one-row carry; when neither holds them (after a rollback
//    further back than the last run) cell start−1 stays valid only if it was encoded with the token
//    now fed at start;
//  - draft::DraftCells decides what a draft row reads (protocol in docs/drafting.md): an eval from p0
//    calls wrote(p0, 0) first, committed rows the drafter encodes are reported with wrote(c0, n), a
//    chain's speculative cells are not reported. A draft row at pos attends to exactly
//    draft_row_cells(pos) = sinks ++ [max(run_begin, pos − W), pos], checked with check_reads();
//  - a CellLedger (prefix hashes of what every main and drafter cell was computed from) checks every
//    cell each draft row reads, independently of DraftCells: a read of anything but committed drafter
//    K/V of the current tokens or this round's own chain cells throws Internal.
// rollback(n) keeps drafter cell n−1 (an eval at n feeding the token it was encoded with keeps it; a
// draft round from n−1 rewrites it); commit(n) drops it (its next token is no longer known);
// restore() drops every drafter cell written after the checkpoint.
//
// Draft chains: draft_begin(p, t) starts a chain at the last committed row p (its final streams
// held) whose next token is t; each draft_step() runs one drafter row: step 0 at cell p writes that
// row's committed K/V, step j > 0 at p + j reads this chain's own speculative cells. Any eval,
// rollback, commit or restore ends the chain. Nothing here allocates after construction.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "strata/draft/draft_cells.h"
#include "strata/engine/cell_ledger.h"
#include "strata/engine/decode_target.h"
#include "strata/engine/sequence_backend.h"
#include "strata/util/aligned.h"

namespace strata::engine {

struct SequenceConfig {
  int64_t mtp_sink = 64;     // drafter sink cells (STRATA_METAL_MTP_SINK, 0..1024)
  int64_t mtp_window = 256;  // drafter window W (STRATA_METAL_MTP_WIN, 1..2051): a draft row reads W + 1 cells
  bool encode_mtp = true;    // encode drafter cells during eval (no effect without an MTP layer)
};

// Opaque state for Sequence::restore: lengths, write clocks and the drafter's bookkeeping.
struct SequenceCheckpoint {
  int64_t n_past = 0, n_committed = 0;
  uint64_t stamp = 0;      // main write clock
  uint64_t mtp_clock = 0;  // drafter write clock
  draft::DraftCells cells;
  const void* owner = nullptr;
};

class Sequence : public DecodeTarget {
 public:
  Sequence(std::unique_ptr<SequenceBackend> backend, const SequenceConfig& cfg);
  ~Sequence() override;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  SequenceBackend& backend() { return *backend_; }
  const SequenceBackend& backend() const { return *backend_; }
  const model::HParams& hparams() const { return backend_->hparams(); }
  const SequenceConfig& sequence_config() const { return cfg_; }
  int n_vocab() const override { return static_cast<int>(hparams().n_vocab); }
  int64_t max_ctx() const override { return backend_->max_ctx(); }
  int max_rows() const { return backend_->max_rows(); }
  int64_t n_past() const override { return n_past_; }
  int64_t n_committed() const { return n_committed_; }
  bool has_drafter() const override { return backend_->has_drafter(); }
  bool has_mtp() const { return has_drafter(); }
  int draft_vocab() const override { return has_drafter() ? static_cast<int>(hparams().mtp_vocab) : 0; }
  const int32_t* draft_vocab_ids() const override { return backend_->draft_vocab_ids(); }

  // Runs tokens[0..n) at positions start.. (start <= n_past). logits_out: nullptr, V floats
  // (LogitRows::Last: the last row; nullptr allowed) or n·V floats (LogitRows::All: required).
  // draft_from_row >= 0: rows >= it (0-based in tokens) are draft rows of a verification window,
  // routed with MOCE's draft parameters; -1 = none.
  void eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
            int64_t draft_from_row) override {
    eval_rows(tokens, n, start, which, logits_out, draft_from_row, -1);
  }
  // A verification window with an exact cut from cut_from_row on (DecodeTarget::eval_window; a window
  // of more rows than one chunk is never cut). Returns the rows evaluated.
  int64_t eval_window(const int32_t* tokens, int64_t n, int64_t start, float* logits_out, int64_t draft_from_row,
                      int64_t cut_from_row) override {
    return eval_rows(tokens, n, start, LogitRows::All, logits_out, draft_from_row, cut_from_row);
  }
  void eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out) {
    eval(tokens, n, start, which, logits_out, -1);
  }
  // The last row's logits (V floats) into last_logits, or none when it is nullptr.
  void eval(const int32_t* tokens, int64_t n, int64_t start, float* last_logits) {
    eval(tokens, n, start, last_logits ? LogitRows::Last : LogitRows::None, last_logits, -1);
  }
  // Drops back to n cells (0 <= n <= n_past).
  void rollback(int64_t n) override;
  // Keeps exactly n cells (n_committed <= n <= n_past) and marks them committed.
  void commit(int64_t n);
  SequenceCheckpoint checkpoint() const;
  // Back to a checkpoint of this sequence; refused (Value) if a cell it keeps was rewritten since.
  void restore(const SequenceCheckpoint& cp);

  // Final streams [n][d] of position p while held (rows of the last eval chunk, or the carried row);
  // nullptr otherwise.
  const float* streams_at(int64_t p) const;

  // The drafter: a chain from the held streams of p (or from H, [n][d], when given).
  bool draft_ready(int64_t p) const override { return has_drafter() && streams_at(p) != nullptr; }
  void draft_begin(int64_t p, int32_t next_token) override { draft_begin_from(nullptr, p, next_token); }
  void draft_begin_from(const float* H, int64_t p, int32_t next_token);
  int32_t draft_step(float* logits_out) override;
  void set_draft_token(int32_t token) override;
  // Adaptive speculation turns the drafter's K/V encoding off around plain steps while drafting does
  // not pay; never beyond what the engine was made with (SequenceConfig::encode_mtp). While it is off
  // the last kPendingRows rows' streams and next tokens are kept (a copy per row), and the next
  // encoding eval or draft chain encodes them first in one batch: a chain after a plain stretch reads
  // those recent cells, not only the sinks and its own (its acceptance is then the drafter's, and a
  // plain step pays nothing for it).
  static constexpr int kPendingRows = 16;
  void set_drafter_encoding(bool on) override { cfg_.encode_mtp = on && encode_allowed_; }
  // Encodes the kept rows that end at p (cells up to p - 1), as draft_begin(p, ..) does first; returns
  // how many. The speculator calls it before timing a draft round.
  int encode_pending(int64_t p);
  void catch_up_drafter(int64_t p) override { encode_pending(p); }
  // n_steps chained steps: draft_begin_from(H, p, next_token) then n_steps draft_step()s. logits_out:
  // [n_steps][Vr] or nullptr; tokens_out: [n_steps].
  void mtp_draft(const float* H, int32_t next_token, int64_t p, int n_steps, float* logits_out, int32_t* tokens_out);
  // Whether drafter cell c holds committed K/V a draft row may read (DraftCells' valid set).
  bool mtp_cell_valid(int64_t c) const;
  // Drafter rows encoded by evals since construction (a round's window skips the cell its first draft
  // step wrote; tests count it).
  int64_t drafter_rows_encoded() const { return rows_encoded_; }
  const draft::DraftCells& draft_cells() const { return cells_; }
  const CellLedger& ledger() const { return ledger_; }
  // The cells the last draft row attended to.
  const std::vector<int32_t>& last_draft_row_cells() const { return list_; }

  // Prefix reuse: where to start evaluating `target` when the sequence holds the tokens `held`
  // (n_past of them in its cells). The longest common prefix is kept (at most target.size() − 1, so
  // the last token is evaluated for its logits); when `drafting`, one token more is re-evaluated
  // (or everything, from 0) if starting there would leave a drafter cell hole a future draft row
  // reads: cell keep−1 is lost when its next token changes and its streams are no longer held.
  int64_t reuse_prefix(std::span<const int32_t> held, std::span<const int32_t> target, bool drafting) const;

 private:
  int64_t eval_rows(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
                    int64_t draft_from_row, int64_t cut_from_row);
  void check_eval_args(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, const float* logits_out) const;
  void encode_rows(const int32_t* tokens, int64_t chunk_start, int rows);
  // Deferred drafter rows (encoding off): keep row q's streams and next token; how many kept rows end at
  // q_end and still hold (their main cells unchanged), at most cap; copy them into mtp_in_ / mtp_tok_.
  void keep_pending(int64_t q, const float* streams, int32_t next_token);
  int pending_before(int64_t q_end, int cap) const;
  void copy_pending(int64_t q_end, int count);
  void drafter_wrote(int64_t q0, int m, const int32_t* next_tokens);  // committed cells q0..q0+m-1
  bool drafter_cell_lost(int64_t keep, int64_t n_target, bool changed) const;
  void end_chain() {
    chain_ = {};
    chain_step_ = 0;
  }

  std::unique_ptr<SequenceBackend> backend_;
  SequenceConfig cfg_;
  bool encode_allowed_ = true;  // cfg.encode_mtp at construction
  std::size_t nd_ = 0;          // floats of one row's streams (hc_count · n_embd)
  int64_t n_past_ = 0, n_committed_ = 0;
  // The rows the backend holds (the last chunk) and the carried row before them.
  int64_t last_start_ = 0;
  int last_rows_ = 0;
  AlignedBuffer<float> carry_;  // [n][d] streams of carry_pos_
  int64_t carry_pos_ = -1;
  uint64_t stamp_ = 0;                // main write clock (one tick per eval)
  std::vector<uint64_t> cell_stamp_;  // [max_ctx] main cells: the clock of their last write
  // Drafter: bookkeeping (what a draft row reads), ground truth, the next token each cell was
  // encoded with (-1: a chain cell or none), write stamps, the current chain.
  draft::DraftCells cells_;
  CellLedger ledger_;
  std::vector<int32_t> mtp_next_;
  std::vector<uint64_t> mtp_stamp_;
  uint64_t mtp_clock_ = 0;
  int64_t rows_encoded_ = 0;
  ScratchBuffer<float> mtp_in_;     // [max_rows][n][d] the drafter's input streams (encode rows, chains)
  ScratchBuffer<int32_t> mtp_tok_;  // [max_rows]
  CellLedger::Chain chain_;
  int chain_step_ = 0;
  int32_t chain_token_ = -1;  // the token the chain's next step embeds
  uint64_t rounds_ = 0;
  std::vector<int32_t> list_;  // a draft row's cells (capacity sink + window + 1)
  // Deferred drafter rows: positions [pend_begin_, pend_end_), row q in slot q % kPendingRows with the
  // main cells' write clocks of q and q + 1 when kept (a row whose cells were rewritten since is dropped).
  AlignedBuffer<float> pend_in_;  // [kPendingRows][n][d]
  std::vector<int32_t> pend_tok_;
  std::vector<uint64_t> pend_stamp_;  // [kPendingRows][2]
  int64_t pend_begin_ = 0, pend_end_ = 0;
};

}  // namespace strata::engine
