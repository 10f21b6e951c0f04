#include "strata/engine/cell_select.h"

#include <algorithm>
#include <cmath>

#include "strata/engine/vec_dot.h"

namespace strata::engine {

Candidates indexer_candidates(const CellPolicy& pol, int64_t p) {
  if (pol.window <= 0) return {};
  const int64_t sink_end = std::min(pol.sink, p + 1);
  const int64_t lo = std::max<int64_t>(p - pol.window + 1, 0);
  return {sink_end, lo};
}

int64_t max_cells(const CellPolicy& pol, int64_t n_cells) {
  if (pol.window <= 0) return n_cells;
  return std::min(n_cells, pol.sink + pol.window + pol.top_k);
}

int64_t select_cells(const CellPolicy& pol, int64_t p, const float* scores, int32_t* order, int32_t* out) {
  int64_t n = 0;
  if (pol.window <= 0) {
    for (int64_t c = 0; c <= p; ++c) out[n++] = static_cast<int32_t>(c);
    return n;
  }
  const Candidates cand = indexer_candidates(pol, p);
  const int64_t lo = std::max<int64_t>(p - pol.window + 1, 0);
  // Sinks (those below the window; the rest are in the window anyway).
  for (int64_t c = 0; c < std::min(cand.begin, lo); ++c) out[n++] = static_cast<int32_t>(c);
  // Indexer picks from the middle.
  const int64_t m = cand.size();
  if (m > 0 && scores && pol.top_k > 0) {
    if (m <= pol.top_k) {
      for (int64_t c = cand.begin; c < cand.end; ++c) out[n++] = static_cast<int32_t>(c);
    } else {
      for (int64_t i = 0; i < m; ++i) order[i] = static_cast<int32_t>(i);
      // Higher score first, ties to the lower id; NaN ranks below everything.
      auto key = [scores](int32_t i) {
        const float s = scores[i];
        return std::isnan(s) ? -INFINITY : s;
      };
      auto better = [&key](int32_t a, int32_t b) {
        const float ka = key(a), kb = key(b);
        return ka > kb || (ka == kb && a < b);
      };
      std::nth_element(order, order + pol.top_k, order + m, better);
      std::sort(order, order + pol.top_k);
      for (int64_t i = 0; i < pol.top_k; ++i) out[n++] = static_cast<int32_t>(cand.begin + order[i]);
    }
  }
  // The window.
  for (int64_t c = lo; c <= p; ++c) out[n++] = static_cast<int32_t>(c);
  return n;
}

float indexer_score(const VecKernels& vk, const float* qi, const float* w, int heads, int dim, const float* ki) {
  float total = 0.0f;
  for (int j = 0; j < heads; ++j) {
    const float dot = vk.dot_f32(qi + static_cast<int64_t>(j) * dim, ki, dim);
    total += w[j] * (dot > 0.0f ? dot : 0.0f);
  }
  return total;
}

}  // namespace strata::engine
