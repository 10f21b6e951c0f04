#include "strata/routing/glm_scoring.h"

#include <cmath>

namespace strata::routing {

void sigmoid_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                       const uint8_t* resident, const MoceParams& p, bool draft_row, int32_t* ids, float* weights) {
  float lowest = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    const float s = 1.0f / (1.0f + std::exp(-logits[e]));
    logits[e] = s;
    sel[e] = sr.bias ? s + sr.bias[e] : s;
    if (sel[e] < lowest) lowest = sel[e];
  }
  // Shift only when a bonus can apply (route_row multiplies only when one of these is > 1).
  const bool bonus = p.resident_bonus > 1.0f || p.rank1_scale > 1.0f;
  if (resident != nullptr && bonus && lowest < 0.0f)
    for (int e = 0; e < n_experts; ++e) sel[e] -= lowest;
  // route_row picks by sel (its weights, renormalised selection scores, are replaced below).
  route_row(sel, n_experts, k, resident, p, draft_row, ids, weights);
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) {
    weights[i] = logits[ids[i]];
    sum += weights[i];
  }
  const float denom = sr.norm ? sum + 1e-20f : 1.0f;
  for (int i = 0; i < k; ++i) weights[i] = weights[i] / denom * sr.scale;
}

}  // namespace strata::routing
