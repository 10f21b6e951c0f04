#pragma once
// Which cells a row at position p attends to (docs/gguf.md §2, "Cells attended"): every c <= p when
// W = 0; otherwise the sinks [0, min(S, p+1)), the window (p-W, p], and, with an indexer, the top-T of
// the remaining cells by the indexer score (ties to the lower id; all of them when fewer than T).
// Lists are ascending and hold each cell at most once.
#include <cstdint>

#include "strata/engine/vec_dot.h"

namespace strata::engine {

struct CellPolicy {
  int64_t sink = 0;    // S
  int64_t window = 0;  // W (0 = every causal cell)
  int64_t top_k = 0;   // T (0 = no indexer picks)
};

// The middle range [begin, end) of cells that compete for the indexer's picks at position p.
struct Candidates {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
};
Candidates indexer_candidates(const CellPolicy& pol, int64_t p);

// Upper bound of the list length for any p (the size of the per-row list buffer).
int64_t max_cells(const CellPolicy& pol, int64_t n_cells);

// Writes the list for position p into out and returns its length. scores[i] is the indexer score of
// candidate cell indexer_candidates(pol, p).begin + i (nullptr: no indexer, no picks). order is
// scratch of at least indexer_candidates(pol, p).size() entries.
int64_t select_cells(const CellPolicy& pol, int64_t p, const float* scores, int32_t* order, int32_t* out);

// Indexer score of one cell: Σ_j w_j · ReLU(qI_j · kI), qI is [heads × dim].
float indexer_score(const VecKernels& vk, const float* qi, const float* w, int heads, int dim, const float* ki);

}  // namespace strata::engine
