#include "strata/routing/ds4_scoring.h"

#include <cmath>

#include "strata/routing/biased_scoring.h"

namespace strata::routing {
namespace {

// softplus as torch computes it (threshold 20: x itself above it).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void sqrt_softplus_route_row(float* logits, float* sel, int n_experts, int k, const SigmoidRouting& sr,
                             const int32_t* hashed, const uint8_t* resident, const MoceParams& p, bool draft_row,
                             int32_t* ids, float* weights) {
  detail::biased_route_row([](float x) { return std::sqrt(softplus(x)); }, logits, sel, n_experts, k, sr, hashed,
                           resident, p, draft_row, ids, weights);
}

}  // namespace strata::routing
