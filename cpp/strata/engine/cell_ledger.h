#pragma once
// The ground truth of what the drafter reads (rule R-9: a draft row reads only cells holding the
// drafter's committed K/V of the current tokens, or its own round's chain cells), kept by
// engine::Sequence beside draft::DraftCells and independent of it, for every backend: every main
// cell and every drafter cell records, as a 64-bit hash, the token prefix its K/V was computed from. Main cell x holds
// key(t_0..t_x); a committed drafter cell c was computed from the main model's streams at c and token t_{c+1}, so it
// holds key(t_0..t_{c+1}); a speculative chain cell holds the id of the draft round that wrote it. A draft row may read
// a cell only if that record matches the current sequence (or it is one of its own round's chain cells):
// check_draft_row throws Internal otherwise. DraftCells decides what to read; this proves the
// decision right on every draft row (tests drive rollbacks, restores and rounds through it).
#include <cstdint>
#include <span>
#include <vector>

namespace strata::engine {

class CellLedger {
 public:
  explicit CellLedger(int64_t n_cells = 0);

  // Main cell x now holds the prefix ending with token t (cell x-1 must hold the current prefix).
  void main_wrote(int64_t x, int32_t t);
  // Drafter cell c now holds committed K/V: the main streams at c and token t_{c+1} = next_token.
  void drafter_committed(int64_t c, int32_t next_token);
  // Drafter cell c now holds a speculative chain cell of draft round `round`.
  void drafter_chain(int64_t c, uint64_t round);

  // The chain a draft row belongs to: started at cell p with next token t_{p+1} = next, round id.
  struct Chain {
    int64_t p = -1;
    int32_t next = -1;
    uint64_t round = 0;
  };
  // Checks a draft row at cell pos (which it writes itself) reading `cells`, with main cells
  // [0, n_past) current: each other cell must hold committed drafter K/V of the current sequence —
  // for c < chain.p the prefix t_0..t_{c+1} of the main cells, for c = chain.p the main prefix plus
  // chain.next — or be a chain cell of chain.round past chain.p. Throws Internal naming the cell.
  void check_draft_row(std::span<const int32_t> cells, int64_t pos, const Chain& chain, int64_t n_past) const;

  uint64_t rows_checked() const { return rows_; }
  uint64_t reads_checked() const { return reads_; }

 private:
  static uint64_t mix(uint64_t h, uint64_t x);
  enum Kind : uint8_t { kNone, kCommitted, kChain };
  std::vector<uint64_t> main_;     // [cell] key of the main prefix 0..cell
  std::vector<uint64_t> drafter_;  // [cell] key (committed) or round (chain)
  std::vector<uint8_t> kind_;      // [cell] Kind
  mutable uint64_t rows_ = 0, reads_ = 0;
};

}  // namespace strata::engine
