#include "strata/engine/ds4_indexer.h"

#include <algorithm>
#include <cmath>

#include "strata/engine/vec_dot.h"

namespace strata::engine {

int ds4_indexer_pick(const float* q, const float* w, int heads, int dim, const float* keys, int64_t n_visible,
                     int top_k, float* scores, int32_t* order, int32_t* picks) {
  if (n_visible <= top_k) {
    for (int64_t i = 0; i < n_visible; ++i) picks[i] = static_cast<int32_t>(i);
    return static_cast<int>(n_visible);
  }
  const float qscale = 1.0f / std::sqrt(static_cast<float>(dim));
  const float wscale = 1.0f / std::sqrt(static_cast<float>(heads));
  for (int64_t i = 0; i < n_visible; ++i) {
    const float* k = keys + i * dim;
    float s = 0.0f;
    for (int h = 0; h < heads; ++h) {
      const float dot = dot_f32(q + static_cast<int64_t>(h) * dim, k, dim);
      s += (dot > 0.0f ? dot * qscale : 0.0f) * (w[h] * wscale);
    }
    scores[i] = s;
    order[i] = static_cast<int32_t>(i);
  }
  std::partial_sort(order, order + top_k, order + n_visible,
                    [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
  std::copy(order, order + top_k, picks);
  std::sort(picks, picks + top_k);
  return top_k;
}

}  // namespace strata::engine
