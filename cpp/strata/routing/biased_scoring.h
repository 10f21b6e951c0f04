#pragma once
// The routing step shared by the scored-and-biased families (glm_scoring.h: sigmoid; ds4_scoring.h:
// sqrt(softplus)): score every expert, choose by score + bias (MOCE's bonus on scores shifted to >= 0),
// or take a fixed hash-table choice, then weight the chosen by their scores. Internal to routing/.
#include <cstdint>

#include "strata/routing/glm_scoring.h"
#include "strata/routing/router.h"

namespace strata::routing::detail {

template <class Score>
void biased_route_row(Score score, float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                      const int32_t* hashed, const uint8_t* resident, const MoceParams& p, bool draft_row, int32_t* ids,
                      float* weights) {
  float lowest = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    const float s = score(logits[e]);
    logits[e] = s;
    sel[e] = sr.bias ? s + sr.bias[e] : s;
    if (sel[e] < lowest) lowest = sel[e];
  }
  if (hashed) {
    for (int i = 0; i < k; ++i) ids[i] = hashed[i];
  } else {
    // Shift only when a bonus can apply (route_row multiplies only when one of these is > 1).
    const bool bonus = p.resident_bonus > 1.0f || p.rank1_scale > 1.0f;
    if (resident != nullptr && bonus && lowest < 0.0f)
      for (int e = 0; e < n_experts; ++e) sel[e] -= lowest;
    // route_row picks by sel (its weights, renormalised selection scores, are replaced below).
    route_row(sel, n_experts, k, resident, p, draft_row, ids, weights);
  }
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) {
    weights[i] = logits[ids[i]];
    sum += weights[i];
  }
  const float denom = sr.norm ? sum + 1e-20f : 1.0f;
  for (int i = 0; i < k; ++i) weights[i] = weights[i] / denom * sr.scale;
}

}  // namespace strata::routing::detail
