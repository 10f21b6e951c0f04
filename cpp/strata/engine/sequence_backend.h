#pragma once
// The forward pieces a backend gives engine::Sequence: run rows of the main model, write the
// drafter's K/V of committed rows, run one drafter row over an explicit cell list, and read the final
// streams of the last run's rows. A backend keeps no sequence state (lengths, drafter bookkeeping,
// chains, checkpoints): Sequence owns all of it, so the decode protocol is written once.
// Implementations: engine::CpuForward (Window + Mtp, engine/cpu_forward.h) and mtl::MetalModel (the
// Metal kernels on the emulator or a GPU, metal/host/metal_model.h).
#include <cstdint>
#include <span>

#include "strata/engine/window.h"
#include "strata/model/model.h"

namespace strata::engine {

class SequenceBackend {
 public:
  virtual ~SequenceBackend() = default;

  virtual const model::HParams& hparams() const = 0;
  virtual int64_t max_ctx() const = 0;     // cells
  virtual int max_rows() const = 0;        // rows of one run_rows call
  virtual int max_logit_rows() const = 0;  // rows of one run_rows call with LogitRows::All
  virtual bool has_drafter() const = 0;
  virtual const int32_t* draft_vocab_ids() const = 0;  // [mtp_vocab] model token ids (nullptr: no drafter)

  // The sequence now holds cells [0, n) (after a rollback, commit or restore); later runs start at
  // or before n. Backends that keep no length ignore it.
  virtual void set_length(int64_t n) = 0;
  // Runs tokens[0..R) at positions start.. (1 <= R <= max_rows, every token valid, start + R <=
  // max_ctx; R <= max_logit_rows with All), writing their main cells. logits_out: V floats of the
  // last row (Last), R·V floats (All) or nullptr (None). Rows >= draft_from_row (>= 0) are draft rows
  // of a verification window (MOCE's draft flag, R-1); -1 = none.
  virtual void run_rows(const int32_t* tokens, int R, int64_t start, LogitRows which, float* logits_out,
                        int draft_from_row) = 0;
  // A verification window (LogitRows::All) that may be cut exactly from row cut_from_row on (>= 1;
  // Window::run): returns the rows it ran, R or fewer; logits_out holds that many rows. Backends without
  // cuts run every row (the Metal backends).
  virtual int run_window(const int32_t* tokens, int R, int64_t start, float* logits_out, int draft_from_row,
                         int cut_from_row) {
    (void)cut_from_row;
    run_rows(tokens, R, start, LogitRows::All, logits_out, draft_from_row);
    return R;
  }
  // Final streams [n][d] (before the HyperHead) of row r of the last run_rows; valid until the next.
  virtual const float* row_streams(int r) const = 0;

  // The drafter's K/V of m committed rows q0.. (streams H [m][n][d], next tokens [m]), K/V only (the
  // drafter never computes indexer state, R-8). m <= max_rows.
  virtual void draft_encode(const float* H, const int32_t* next_tokens, int m, int64_t q0) = 0;
  // One drafter row at cell pos from streams H ([n][d]) and input token `token`, attending to exactly
  // `cells` (ascending, <= pos; pos's own K/V written first). Writes its draft logits ([mtp_vocab])
  // to logits_out (nullptr: not wanted) and its output streams to streams_out ([n][d]; may alias H);
  // returns its draft token (vocab_ids[argmax], ties to the lower index). `chained`: H is the previous
  // chain step's output rather than the main model's final streams (glm4moe normalises the two with
  // different weights; strata treats them alike).
  virtual int32_t draft_row(const float* H, int32_t token, int64_t pos, std::span<const int32_t> cells,
                            float* logits_out, float* streams_out, bool chained) = 0;
};

}  // namespace strata::engine
