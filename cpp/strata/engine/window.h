#pragma once
// The main model over a window of rows (SPEC §2.2): one decode row, a verification window of k+1
// rows, or a prefill chunk (up to max_rows). KV cells are indexed by cell id = absolute position.
// Rows at positions start .. start+n-1 write their cells, then attend to cell lists (sinks + window +
// indexer picks, or every causal cell). After a run the final streams of every row (before the
// HyperHead) and the logits of the requested rows are kept until the next run.
//
// Lengths: n_past = cells holding valid K/V; n_committed <= n_past = the prefix that rollback keeps.
// A run may start anywhere in [0, n_past] (cells at and after start are overwritten);
// commit(n) keeps exactly n cells and marks them committed; rollback(n) drops back to n cells.
// Nothing beyond n_past is ever read, so rollback and restore cost nothing and are exact: a
// recomputation after a rollback gives bitwise the same logits.
#include <cstdint>
#include <functional>
#include <memory>

#include "strata/engine/cell_select.h"
#include "strata/engine/ds4_state.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/rope.h"
#include "strata/engine/scratch.h"
#include "strata/model/model.h"
#include "strata/routing/router.h"
#include "strata/util/aligned.h"

namespace strata {
class ThreadPool;
}
namespace strata::experts {
class ExpertStore;
}

namespace strata::engine {

struct WindowConfig {
  int64_t max_ctx = 0;         // cells; 0 = min(context_length, 32768)
  int max_rows = 512;          // rows per run
  int max_logit_rows = 0;      // rows that may ask for logits in one run; 0 = auto (≈64 MiB of logits, >= 16)
  int64_t extra_list = 0;      // a longer attended list another user of the scratch needs (the MTP)
  ThreadPool* pool = nullptr;  // nullptr = ThreadPool::global()
  experts::ExpertStore* experts = nullptr;  // not owned; nullptr = the mmap views, nothing counted
  routing::MoceParams moce;                 // expert selection; the store's residency map feeds it
};

enum class LogitRows { None, Last, All };

struct Checkpoint {
  int64_t n_past = 0;
  int64_t n_committed = 0;
  uint64_t stamp = 0;  // write counter when taken: restore checks no kept cell was rewritten since
};

class Window {
 public:
  Window(const model::Model& m, const WindowConfig& cfg);

  const model::Model& model() const { return m_; }
  const model::HParams& hparams() const { return m_.hparams(); }
  int64_t max_ctx() const { return max_ctx_; }
  int max_rows() const { return max_rows_; }
  int max_logit_rows() const { return max_logit_rows_; }
  ThreadPool* pool() const { return pool_; }
  Scratch& scratch() { return *scratch_; }
  const KvCells& kv() const { return kv_; }

  // Runs tokens[0..n) at positions start..start+n-1. 1 <= n <= max_rows, start <= n_past,
  // start + n <= max_ctx, every token < vocab. LogitRows::All needs n <= max_logit_rows.
  // draft_from_row >= 0: rows >= it are draft rows of a verification window (MOCE R-1 draft flag);
  // -1 = none. cut_from_row >= 1: an exact window cut (routing::window_rows_kept, expert store in stream
  // mode only; not deepseek4): rows >= it may be dropped at the first layer where they would read an
  // expert the rows before them do not, and the run then holds only the rows before (rows(), the cells,
  // the logits). Returns the rows run: n, or fewer after a cut.
  int run(const int32_t* tokens, int n, int64_t start, LogitRows which, int draft_from_row = -1, int cut_from_row = -1);

  // Rows and logits of the last run. logits(i) is the i-th row that has logits (Last: i = 0 is the
  // last row; All: i = row).
  int rows() const { return last_rows_; }
  int64_t rows_start() const { return last_start_; }
  int logit_rows() const { return last_logit_rows_; }
  const float* logits(int i) const;
  // Streams [n][d] of row r of the last run after the last layer (the MTP's input).
  const float* final_streams(int r) const;

  int64_t n_past() const { return n_past_; }
  int64_t n_committed() const { return n_committed_; }
  void commit(int64_t n);
  void rollback(int64_t n);
  Checkpoint checkpoint() const { return Checkpoint{n_past_, n_committed_, stamp_}; }
  void restore(const Checkpoint& cp);

  // Expert selection and the expert store (docs/experts.md).
  void set_moce(const routing::MoceParams& p) { moce_ = p; }
  const routing::MoceParams& moce() const { return moce_; }
  experts::ExpertStore* experts() const { return experts_; }

 private:
  const model::Model& m_;
  ThreadPool* pool_;
  int64_t max_ctx_;
  int max_rows_;
  int max_logit_rows_;
  CellPolicy policy_;
  experts::ExpertStore* experts_;
  routing::MoceParams moce_;
  KvCells kv_;  // deepseek4: a placeholder of one cell (its cells are ds4_'s)
  Rope rope_;
  std::unique_ptr<Ds4State> ds4_;  // deepseek4 only
  std::unique_ptr<Scratch> scratch_;
  ScratchBuffer<float> streams_;        // [max_rows][n][d]
  ScratchBuffer<float> logits_;         // [max_logit_rows][V]
  AlignedBuffer<uint64_t> cell_stamp_;  // [max_ctx] write counter of the run that last wrote the cell
  uint64_t stamp_ = 0;
  int64_t n_past_ = 0;
  int64_t n_committed_ = 0;
  int last_rows_ = 0;
  int64_t last_start_ = 0;
  int last_logit_rows_ = 0;
  int logits_first_row_ = 0;
};

}  // namespace strata::engine
