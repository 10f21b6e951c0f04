#include "strata/engine/cell_select.h"

#include <algorithm>
#include <bit>
#include <functional>
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

namespace {

// A score as an unsigned key whose integer order is the ranking's order: NaN ranks with −∞ (below
// everything), −0 with +0 (they compare equal).
inline uint32_t rank_key(float s) {
  if (std::isnan(s)) s = -INFINITY;
  if (s == 0.0f) s = 0.0f;
  const auto b = std::bit_cast<uint32_t>(s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

}  // namespace

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
      // The T-th best key t (one nth_element over integer keys); then, in id order, every
      // candidate above t and, from the lowest id, as many equal to t as fill T: the same set as
      // ranking by (score desc, id asc), already ascending.
      const int64_t T = pol.top_k;
      auto* keys = reinterpret_cast<uint32_t*>(order);
      for (int64_t i = 0; i < m; ++i) keys[i] = rank_key(scores[i]);
      std::nth_element(keys, keys + (T - 1), keys + m, std::greater<>());
      const uint32_t t = keys[T - 1];
      int64_t ties = T;
      for (int64_t i = 0; i < T - 1; ++i) ties -= keys[i] > t;
      for (int64_t i = 0; i < m; ++i) {
        const uint32_t k = rank_key(scores[i]);
        if (k > t || (k == t && ties-- > 0)) out[n++] = static_cast<int32_t>(cand.begin + i);
      }
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
