#pragma once
// Bookkeeping of the MTP drafter's KV cells (SPEC §2.6, R-9): which cells hold committed K/V, and
// the cell list a draft row attends to. Cell t holds the drafter's K/V for position t, computed from
// the main model's hidden state at t and token t + 1, so it is committed once tokens 0..t+1 are.
//
// Valid set = sink prefix [0, sink_end) ∪ run [run_begin, run_end), kept through ONE helper,
// wrote(c0, n): a write of cells [c0, c0 + n) marks everything at or past c0 stale first, then the
// written cells valid; a write that leaves a gap after the run restarts the run; n = 0 only marks
// stale. reset() and load() clear it. Protocol for the engine (docs/drafting.md):
//   - every main-model pass that feeds positions from p0 calls wrote(p0, 0) first (drafting or not);
//   - committed rows the drafter encodes are reported with wrote(c0, n), in increasing order;
//   - the chain of a draft round writes its speculative cells [run_end, ...) WITHOUT wrote().
#include <cstdint>
#include <span>
#include <vector>

namespace strata::draft {

class DraftCells {
 public:
  // sink: 0..1024 (0 = off); window: 1..2051. Throws Value outside.
  DraftCells(int sink = 64, int window = 256);

  void wrote(int32_t c0, int32_t n);
  void reset() { clear(); }
  void load() { clear(); }

  int sink() const { return sink_; }
  int window() const { return window_; }
  int32_t sink_end() const { return sink_end_; }
  int32_t run_begin() const { return run0_; }
  int32_t run_end() const { return run1_; }
  bool valid(int32_t cell) const { return (cell >= 0 && cell < sink_end_) || (cell >= run0_ && cell < run1_); }
  // The most cells a draft row can attend to: sink + window + its own cell.
  int max_row_cells() const { return sink_ + window_ + 1; }

  // The cells a draft row at cell `pos` attends to, ascending:
  //   [0 .. min(sink_end, first) − 1] ++ [first .. pos],  first = max(run_begin, pos − window).
  // The first draft row of a round is the last committed row (pos = run_end − 1); chain step j sits at
  // pos = run_end − 1 + j and also reads this round's chain cells [run_end, pos]. Writes the list to
  // `out` (resized, capacity kept) and returns its size. Throws Internal if the run is empty or
  // pos < run_begin.
  int draft_row_cells(int32_t pos, std::vector<int32_t>& out) const;

  // Asserts that `cells` is a list a draft row may read: the row sits at pos = run_end − 1 + chain_step
  // (chain_step 0: the round's first draft row, the last committed row; j > 0: chain step j); the list
  // is strictly ascending, has nothing past pos, and every cell is valid or one of this round's chain
  // cells [run_end, pos]. Throws Internal naming the problem. Cheap enough for every draft row.
  void check_reads(std::span<const int32_t> cells, int32_t pos, int chain_step = 0) const;

 private:
  void clear() { sink_end_ = run0_ = run1_ = 0; }
  int sink_;
  int window_;
  int32_t sink_end_ = 0;
  int32_t run0_ = 0, run1_ = 0;
};

}  // namespace strata::draft
