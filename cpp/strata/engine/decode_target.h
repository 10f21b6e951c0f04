#pragma once
// What a speculative round drives (draft/speculator.h): one sequence through a main model and its MTP
// drafter. engine::Sequence implements it over every backend (CPU, metal-emu, Metal), so the draft
// loop — drafting, retention, the verification window, rollback — is written once; the speculator's
// own tests drive it through a scripted target.
//
// The drafter protocol (SPEC §2.6, docs/drafting.md): draft_begin(p, t) starts a chain at the last
// committed row p (its final streams are still held from the last eval) whose next token is t; each
// draft_step() runs one drafter row: step 0 at cell p writes that row's committed drafter K/V (from
// the main model's streams), step j > 0 at cell p + j reads this chain's own speculative cells. The
// next eval from p + 1 replaces the speculative cells with committed ones (catch-up rows).
#include <cstdint>

#include "strata/engine/window.h"

namespace strata::engine {

class DecodeTarget {
 public:
  virtual ~DecodeTarget() = default;

  virtual int n_vocab() const = 0;
  virtual int64_t max_ctx() const = 0;
  virtual int64_t n_past() const = 0;
  virtual bool has_drafter() const = 0;
  virtual int draft_vocab() const = 0;                 // Vr: the drafter's restricted vocabulary
  virtual const int32_t* draft_vocab_ids() const = 0;  // [Vr] model token ids

  // Runs tokens[0..n) at positions start.. (start <= n_past()). logits_out: nullptr, V floats
  // (Last) or n·V floats (All). Rows >= draft_from_row (>= 0) are draft rows of a verification
  // window (MOCE routes them with its draft parameters, R-1); -1 = none.
  virtual void eval(const int32_t* tokens, int64_t n, int64_t start, LogitRows which, float* logits_out,
                    int64_t draft_from_row) = 0;
  // A verification window: eval with LogitRows::All that the target may cut exactly from row
  // cut_from_row on (>= 1; -1 = never): the rows from the first that would read an expert the rows
  // before it do not are dropped (Window::run). Returns the rows evaluated (n or fewer); logits_out
  // holds that many rows and the target holds their cells. Targets without cuts evaluate every row.
  virtual int64_t eval_window(const int32_t* tokens, int64_t n, int64_t start, float* logits_out,
                              int64_t draft_from_row, int64_t cut_from_row) {
    (void)cut_from_row;
    eval(tokens, n, start, LogitRows::All, logits_out, draft_from_row);
    return n;
  }
  // Drops back to n cells (n <= n_past()).
  virtual void rollback(int64_t n) = 0;

  // Whether a draft chain can start at p: its final streams are still held (rows of the last eval).
  virtual bool draft_ready(int64_t p) const = 0;
  // Starts a draft chain at position p (p < n_past(), its final streams held) with next token t_{p+1}.
  virtual void draft_begin(int64_t p, int32_t next_token) = 0;
  // Runs the chain's next drafter row; writes its draft logits ([Vr]) to logits_out (nullptr: not
  // wanted) and returns its draft token (a model token id).
  virtual int32_t draft_step(float* logits_out) = 0;
  // Replaces the token the chain's last draft_step returned as the input of its next step: a draft the
  // caller chose from the returned logits (the speculator applies the sampling penalties first).
  virtual void set_draft_token(int32_t token) = 0;

  // Whether evals encode the drafter's K/V of the rows they commit (on for an engine made with a
  // drafter). Adaptive speculation turns it off around plain steps while drafting does not pay; the
  // drafter's cells then have a gap, which draft_cells handles (a later chain reads the sinks and the
  // run written since). Backends that always encode ignore it.
  virtual void set_drafter_encoding(bool on) { (void)on; }
  // Before a draft chain at p: encode the drafter rows deferred while encoding was off (a batch of the
  // most recent ones, so the chain does not read only its own cell). Targets that always encode ignore it.
  virtual void catch_up_drafter(int64_t p) { (void)p; }
};

}  // namespace strata::engine
