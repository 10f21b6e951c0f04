#include "strata/engine/expert_select.h"

#include <cmath>

namespace strata::engine {

void select_experts(const float* probs, int n_experts, int k, int32_t* ids, float* weights) {
  // Insertion into a sorted top-k list: k is small (<= a few tens), E up to a few hundred.
  int n = 0;
  for (int e = 0; e < n_experts; ++e) {
    const float p = std::isnan(probs[e]) ? -1.0f : probs[e];
    if (n == k && !(p > (std::isnan(probs[ids[k - 1]]) ? -1.0f : probs[ids[k - 1]]))) continue;
    int pos = n < k ? n++ : k - 1;
    // Strictly greater moves up: an equal probability keeps the lower id first.
    while (pos > 0) {
      const float q = std::isnan(probs[ids[pos - 1]]) ? -1.0f : probs[ids[pos - 1]];
      if (!(p > q)) break;
      ids[pos] = ids[pos - 1];
      --pos;
    }
    ids[pos] = e;
  }
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += probs[ids[i]];
  const float den = std::fmax(sum, 0x1p-14f);
  for (int i = 0; i < k; ++i) weights[i] = probs[ids[i]] / den;
}

}  // namespace strata::engine
