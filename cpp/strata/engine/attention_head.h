#pragma once
// One query head attending to a list of cells with the chunked softmax of docs/gguf.md §2:
// scores s = (q·k)/sqrt(Dh); per chunk of 64 list entries m = max, l = Σ e^{s-m}, o = Σ e^{s-m}·v;
// merged max-first: M = max m_c, out = Σ e^{m_c-M}·o_c / Σ e^{m_c-M}·l_c.
#include <cstdint>

#include "strata/engine/kv_cells.h"

namespace strata::engine {

inline constexpr int kSoftmaxChunk = 64;

// cells == nullptr means the implicit list 0, 1, ..., n-1. scores: scratch of n floats; chunk_o:
// scratch of Dh floats; out: Dh floats.
// Cells c0, c0 + 1, ... of a head seen as cells 0, 1, ... (a chunk of the implicit list), whatever
// the cells' type.
KvHeadData from_cell(KvHeadData h, int64_t c0);

void attend_head(const KvCells& kv, int layer, int kv_head, const float* q, const int32_t* cells, int64_t n,
                 float* scores, float* chunk_o, float* out);

// G query heads (G <= kMaxHeadGroup: a GQA group) that read the same KV head over the same cell
// list: each head's result is bitwise attend_head's, but every key and value is read and
// converted once for the G heads. q[g], out[g]: Dh floats; scores: scratch of G·n floats;
// chunk_o: scratch of G·Dh floats.
void attend_group(const KvCells& kv, int layer, int kv_head, const float* const* q, int G, const int32_t* cells,
                  int64_t n, float* scores, float* chunk_o, float* const* out);

// T rows of a window or prefill chunk, G heads each (G·T <= kMaxHeadGroup), over the implicit cell
// list: row t attends to cells 0 .. n0 + t - 1 (causal). Each key is read and converted once for all
// G·T heads (a row-by-row attend_group reads every key T times); each result is bitwise
// attend_group's for its row. q[t·G + g], out[t·G + g]: Dh floats; scores: scratch of
// G·T·(n0 + T - 1) floats; chunk_o: scratch of G·Dh floats.
void attend_rows(const KvCells& kv, int layer, int kv_head, const float* const* q, int G, int T, int64_t n0,
                 float* scores, float* chunk_o, float* const* out);

}  // namespace strata::engine
