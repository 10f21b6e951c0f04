#include "strata/routing/ds4_scoring.h"

#include <cmath>

namespace strata::routing {
namespace {

// softplus as torch computes it (threshold 20: x itself above it).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void sqrt_softplus_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                             const int32_t* hashed, const uint8_t* resident, const MoceParams& p, bool draft_row,
                             int32_t* ids, float* weights) {
  float lowest = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    const float s = std::sqrt(softplus(logits[e]));
    logits[e] = s;
    sel[e] = sr.bias ? s + sr.bias[e] : s;
    if (sel[e] < lowest) lowest = sel[e];
  }
  if (hashed) {
    for (int i = 0; i < k; ++i) ids[i] = hashed[i];
  } else {
    const bool bonus = p.resident_bonus > 1.0f || p.rank1_scale > 1.0f;
    if (resident != nullptr && bonus && lowest < 0.0f)
      for (int e = 0; e < n_experts; ++e) sel[e] -= lowest;
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

}  // namespace strata::routing
