#include "strata/engine/ds4_cells.h"

#include <string>

#include "strata/util/error.h"

namespace strata::engine {
namespace {

std::size_t checked(int64_t a, int64_t b) {
  constexpr int64_t kLimit = int64_t{1} << 38;  // elements: far beyond any sane cache
  if (a < 0 || b < 0 || (a != 0 && b > kLimit / a))
    throw_error(ErrorKind::Value, "deepseek4 cells: size overflows (reduce max_ctx)");
  return static_cast<std::size_t>(a * b);
}

}  // namespace

Ds4Cells::Ds4Cells(const model::HParams& hp, const std::vector<model::Ds4AttentionWeights>& layers, int64_t n_cells)
    : n_cells_(n_cells), dh_(hp.head_dim), di_(hp.ds4.idx_dim), layers_(layers.size()) {
  if (n_cells <= 0) throw_error(ErrorKind::Value, "deepseek4 cells: n_cells must be > 0");
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const model::Ds4AttentionWeights& w = layers[l];
    Layer& c = layers_[l];
    c.ratio = w.ratio;
    c.kv.resize(checked(n_cells, dh_));
    if (w.ratio == 0) continue;
    c.comp_width = int64_t{w.comp.coff} * dh_;
    c.comp_kv.resize(checked(n_cells, c.comp_width));
    c.comp_gate.resize(checked(n_cells, c.comp_width));
    c.entries.resize(checked(n_cells / w.ratio + 1, dh_));
    if (w.ratio != 4) continue;
    c.idx_kv.resize(checked(n_cells, 2 * di_));
    c.idx_gate.resize(checked(n_cells, 2 * di_));
    c.idx_entries.resize(checked(n_cells / 4 + 1, di_));
  }
}

std::size_t Ds4Cells::bytes() const {
  std::size_t n = 0;
  for (const Layer& c : layers_)
    n += c.kv.size() + c.comp_kv.size() + c.comp_gate.size() + c.entries.size() + c.idx_kv.size() + c.idx_gate.size() +
         c.idx_entries.size();
  return n * sizeof(float);
}

}  // namespace strata::engine
