#pragma once
// What a deepseek4 sequence keeps per position and per layer (docs/models.md, deepseek4; the cell
// conventions of engine/window.h: cell id = absolute position, nothing beyond n_past is read):
//   - the sliding branch's K = V vector (normed, rotated) of every position;
//   - in CSA / HCA layers, every position's compressor projections (kv and raw gate, coff·Dh each)
//     and, in CSA layers, the indexer compressor's (2·Di each);
//   - the compressed entries: entry w is formed from the projections when its window closes, i.e.
//     when position (w + 1)·ratio − 1 runs, and is visible to a query at p only when
//     w < (p + 1) / ratio.
// So a rollback to n costs nothing and is exact: an entry whose closing position is >= n is never
// read before that position runs again and rewrites it; a prefill chunk boundary anywhere gives the
// same cells. Allocated once for n_cells positions (memory grows with the context: the projections
// of closed windows are kept, a ring of the open windows would do); nothing per token.
#include <cstdint>
#include <vector>

#include "strata/model/ds4_weights.h"
#include "strata/model/hparams.h"
#include "strata/util/aligned.h"

namespace strata::engine {

class Ds4Cells {
 public:
  Ds4Cells(const model::HParams& hp, const std::vector<model::Ds4AttentionWeights>& layers, int64_t n_cells);

  int64_t n_cells() const { return n_cells_; }
  std::size_t bytes() const;

  float* kv(int l, int64_t pos) { return at(L(l).kv, pos, dh_); }
  // Compressor projections of a position ([coff·Dh] each) and the layer's compressed entries ([Dh]).
  float* comp_kv(int l, int64_t pos) { return at(L(l).comp_kv, pos, L(l).comp_width); }
  float* comp_gate(int l, int64_t pos) { return at(L(l).comp_gate, pos, L(l).comp_width); }
  float* entry(int l, int64_t w) { return at(L(l).entries, w, dh_); }
  // The indexer's (CSA layers): projections [2·Di] and compressed keys [Di].
  float* idx_kv(int l, int64_t pos) { return at(L(l).idx_kv, pos, 2 * di_); }
  float* idx_gate(int l, int64_t pos) { return at(L(l).idx_gate, pos, 2 * di_); }
  float* idx_entry(int l, int64_t w) { return at(L(l).idx_entries, w, di_); }

 private:
  struct Layer {
    int ratio = 0;
    int64_t comp_width = 0;
    AlignedBuffer<float> kv, comp_kv, comp_gate, entries, idx_kv, idx_gate, idx_entries;
  };
  Layer& L(int l) { return layers_[static_cast<std::size_t>(l)]; }
  static float* at(AlignedBuffer<float>& b, int64_t i, int64_t width) {
    return b.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(width);
  }

  int64_t n_cells_;
  int64_t dh_, di_;
  std::vector<Layer> layers_;
};

}  // namespace strata::engine
